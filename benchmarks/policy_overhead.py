"""Median microseconds per decide + observe, per policy, at B = 1, 64 and 256.

    .venv/bin/python benchmarks/policy_overhead.py [--steps 3000]

Each policy first runs a warm-up on the synthetic loop (so learned tables exist),
then each timed call pairs one ``decide`` with the ``observe`` of a pre-built
outcome; the median over ``--steps`` calls is printed. Goal for ``nightjar``:
under 10 us, negligible beside a ~10 ms GPU step.
"""

from __future__ import annotations

import argparse
import statistics
import time

from nightjar.core.policy import PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.policies.harness import KneeLatency, run_loop
from nightjar.policies.registry import make_policy

POLICIES = [
    "nightjar", "nightjar+", "dsd", "banditspec", "banditspec-exp3", "sglang", "tetris", "oracle",
    "fixed:3", "schedule",
]
BATCHES = (1, 64, 256)


def median_us(spec: str, b: int, steps: int) -> float:
    lat = KneeLatency()
    pol = make_policy(spec, PolicyEnv(gamma_max=4, seed=0, latency=lat))
    run_loop(pol, lat, lambda t: b, lambda t, n: [0.7] * n, 200)
    rates = [0.7] * b
    ctx = StepContext(
        0.0, b, 0, 500, 1000, True, 4, 512.0, list(range(b)), rates, rates,
    )
    outcome = StepOutcome(
        2, b, lat.step_time_s(b, 2, 512.0), 2 * b, b, 2 * b,
        request_ids=list(range(b)), per_request_accepted=[1] * b, per_request_drafted=[2] * b,
    )
    times = []
    clock = time.perf_counter_ns
    for _ in range(steps):
        t0 = clock()
        pol.decide(ctx)
        pol.observe(outcome)
        times.append(clock() - t0)
    return statistics.median(times) / 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    args = parser.parse_args()
    print(f"{'policy':18s}" + "".join(f"{'B=' + str(b):>10s}" for b in BATCHES) + "   (median us)")
    for spec in POLICIES:
        row = [median_us(spec, b, args.steps) for b in BATCHES]
        print(f"{spec:18s}" + "".join(f"{x:10.2f}" for x in row))


if __name__ == "__main__":
    main()
