"""Prefill-only steps of a live benchmark against the profile's price, by the idle gap
before each: does a step that wakes an idle engine cost more than the profile says?

    .venv/bin/python experiments/prefill_after_idle.py BENCH_DIR PROFILE

Reads a ``nightjar bench live`` folder (:func:`nightjar.results.bench.read_bench`),
prices each run's prefill-only steps as ``nightjar validate`` does
(:func:`nightjar.fidelity.compare.priced_steps`, with the draft-KV mode the benchmark ran),
and prints, per bucket of the idle time before the step (its start less the previous
step's end), the steps, the live / priced ratio (also in the run's time base: over
its time base, :func:`nightjar.fidelity.compare.time_base`, which divides out a machine that
ran faster or slower than when the profile was measured) and the extra milliseconds. With a
profile that has a ``wake`` table the price includes it, so what is left is the
residual. Pure reading: the figures are the step logs'.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from nightjar.errors import NightjarInputError
from nightjar.fidelity.compare import priced_steps, time_base
from nightjar.profile.profile import Profile, load_profile
from nightjar.results.bench import read_bench

GAPS = (-1.0, 0.1, 1.0, 1e9)  # seconds of idle before the step: bucket edges


def rows(bench: Path, profile: Profile) -> pd.DataFrame:
    record = read_bench(bench)
    sync = record.meta.get("draft_kv") == "sync"
    out = []
    for run in record.runs:
        priced = priced_steps(run.result, profile, sync)
        # A machine that ran faster or slower than when the profile was measured moves
        # every step by about the run's time base; the base ratio divides it out.
        out.append(priced[priced.kind == "prefill"].assign(label=run.label,
                                                           base=time_base(priced)))
    df = pd.concat(out) if out else pd.DataFrame()
    return df.rename(columns={"step_time_s": "live_s"})


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: prefill_after_idle.py BENCH_DIR PROFILE")
    bench = Path(sys.argv[1])
    try:
        df = rows(bench, load_profile(sys.argv[2]))
    except NightjarInputError as exc:  # a missing or damaged folder or profile: one line
        raise SystemExit(f"prefill_after_idle: {exc}") from None
    if df.empty:
        raise SystemExit(f"{bench}: no prefill-only step in any run")
    df["ratio"] = df.live_s / df.priced_s
    df["base_ratio"] = df.ratio / df.base
    df["extra_ms"] = 1e3 * (df.live_s - df.priced_s)
    first = np.isinf(df.idle_s)  # a run's first step: no step before it
    print(f"{bench}: {len(df)} prefill-only steps ({int(first.sum())} first of a run); "
          f"runs' time base (decode live / priced): {df.groupby('label').base.first().min():.2f}"
          f"-{df.groupby('label').base.first().max():.2f}")
    print("| idle before | steps | live / priced (median) | mean | in the run's time base "
          "(median) | extra ms (median) | live ms (mean) | priced ms (mean) |")
    print("|---|---|---|---|---|---|---|---|")
    buckets = pd.cut(df.idle_s, list(GAPS))
    for bucket, g in df.groupby(buckets, observed=True):
        lo, hi = bucket.left, bucket.right
        span = (f"over {lo:g} s" if hi > 1e8
                else f"up to {hi:g} s" if lo < 0 else f"{lo:g}-{hi:g} s")
        print(f"| {span} | {len(g)} | {g.ratio.median():.2f} | "
              f"{g.ratio.mean():.2f} | {g.base_ratio.median():.2f} | {g.extra_ms.median():.0f} | "
              f"{1e3 * g.live_s.mean():.0f} | {1e3 * g.priced_s.mean():.0f} |")
    long = df[(df.idle_s > 1.0) & ~first]
    if len(long) > 2:
        print(f"after > 1 s idle: correlation of the extra with the idle time "
              f"{long.extra_ms.corr(long.idle_s):.2f}")


if __name__ == "__main__":
    main()
