"""Derive the all-reduce table and fit that ``nightjar.roofline.tensor_parallel`` uses.

Source: Microsoft Vidur (MIT licence, github.com/microsoft/vidur, commit 7d47513),
``data/profiling/network/{a100,h100}_dgx/all_reduce.csv``: NCCL all-reduce times on
NVSwitch (DGX/HGX) nodes, fp16 buffers, ``size`` in bytes, times in ms. Vidur's
licence is in ``tools/calibrate/vidur/LICENSE``.

Usage:
    python tools/calibrate/fit_all_reduce.py derive VIDUR_NETWORK_DIR \\
        > tools/calibrate/vidur/all_reduce.csv
    python tools/calibrate/fit_all_reduce.py fit tools/calibrate/vidur/all_reduce.csv

``derive`` keeps the intra-node rows (``num_workers == devices_per_node``) and bins them
by power of two of the size: one row per bin with the median size and the median of
the per-size median times. ``fit`` fits ``t = latency + bytes / algbw`` to those bins
(see ``fit_rows``) and prints the coefficients with the median and worst error over
the bins.
"""

from __future__ import annotations

import csv
import math
import statistics
import sys
from collections import defaultdict
from pathlib import Path

HEADER = ("gpu", "num_gpus", "bytes", "time_us", "sizes")


def derive(network_dir: Path) -> None:
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(HEADER)
    for gpu in ("a100", "h100"):
        bins: dict[tuple[int, int], list[tuple[int, float]]] = defaultdict(list)
        with open(network_dir / f"{gpu}_dgx" / "all_reduce.csv", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                n, per_node = int(row["num_workers"]), int(row["devices_per_node"])
                if n != per_node:
                    continue  # across nodes: not a tensor-parallel group
                size = int(row["size"])
                ms = float(row["time_stats.all_reduce.median"])
                bins[(n, int(math.log2(size)))].append((size, ms))
        for (n, _), rows in sorted(bins.items()):
            size = int(statistics.median(s for s, _ in rows))
            us = statistics.median(t for _, t in rows) * 1e3
            out.writerow((gpu, n, size, f"{us:.1f}", len(rows)))


def fit_rows(rows: list[tuple[float, float]]) -> tuple[float, float]:
    """(latency_s, algbw bytes/s) from (bytes, seconds) bins.

    Latency is the median time of messages up to 1 MiB and algbw the median of
    ``bytes / (time - latency)`` over messages from 8 MiB: medians, because Vidur's
    small-message times are bimodal (about 7-10 us or 30-60 us at the same size) and
    a least-squares fit chases whichever mode is nearer.
    """
    latency = statistics.median(t for x, t in rows if x <= 1 << 20)
    algbw = statistics.median(x / (t - latency) for x, t in rows if x >= 8 << 20)
    return latency, algbw


def fit(table: Path) -> None:
    groups: dict[tuple[str, int], list[tuple[float, float]]] = defaultdict(list)
    with open(table, encoding="utf-8") as f:
        for row in csv.DictReader(f):
            groups[(row["gpu"], int(row["num_gpus"]))].append(
                (float(row["bytes"]), float(row["time_us"]) * 1e-6)
            )
    for (gpu, n), rows in sorted(groups.items()):
        a, bw = fit_rows(rows)
        errs = [(a + x / bw - t) / t for x, t in rows]
        worst = max(errs, key=abs)
        med = statistics.median(abs(e) for e in errs)
        print(f'("{gpu}", {n}): ({a * 1e6:.1f}e-6, {bw / 1e9:.1f}e9),'
              f"  # median |err| {med:.0%}, worst {worst:+.0%}")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("derive", "fit"):
        sys.exit(__doc__)
    (derive if sys.argv[1] == "derive" else fit)(Path(sys.argv[2]))
