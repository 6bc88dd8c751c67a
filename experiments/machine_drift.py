"""How steady is this machine's own speed? (issue 21)

The agreement check holds a profile measured at one time against live runs measured
minutes to an hour later; any drift of the machine's speed between the two lands in
the simulator's error. This times the same fixed work (``--reps`` float32 matrix
products of ``--size`` squared, on every core numpy's BLAS uses) every ``--every``
seconds for ``--seconds`` seconds and prints each timing, their spread, and the
largest ratio between timings one to ten samples apart. Run it alone on the machine.

    python experiments/machine_drift.py [--seconds 90]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--every", type=float, default=0.5)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    a = rng.standard_normal((args.size, args.size), dtype=np.float32)
    b = rng.standard_normal((args.size, args.size), dtype=np.float32)
    a @ b  # warm the BLAS threads
    times: list[float] = []
    end = time.monotonic() + args.seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        for _ in range(args.reps):
            a @ b
        times.append(time.perf_counter() - start)
        time.sleep(args.every)
    med = statistics.median(times)
    print(f"{len(times)} timings of {args.reps} products of {args.size}^2 (ms): "
          f"{[round(1e3 * t) for t in times]}")
    print(f"min {1e3 * min(times):.0f}, median {1e3 * med:.0f}, max {1e3 * max(times):.0f} ms; "
          f"min/median {min(times) / med:.3f}, max/median {max(times) / med:.3f}")
    for lag in (1, 10):
        ratios = [max(x, y) / min(x, y) for x, y in zip(times, times[lag:], strict=False)]
        if ratios:
            print(f"timings {lag} apart: median ratio {statistics.median(ratios):.3f}, "
                  f"largest {max(ratios):.3f}")


if __name__ == "__main__":
    main()
