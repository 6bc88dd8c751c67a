"""Prefill-only steps of a live benchmark against the profile's price, by the idle gap
before each: does a step that wakes an idle engine cost more than the profile says?

    .venv/bin/python experiments/prefill_after_idle.py BENCH_DIR PROFILE

Reads every ``round-*/<policy>/steps.csv`` of a ``nightjar bench live`` folder, prices
each prefill-only step (batch 0, prompt tokens > 0) as the simulator does
(:class:`nightjar.sim.price.StepPricer`: the target's prefill curve, plus the draft's
prefill and further passes where the run had a draft), and prints, per bucket of the
idle time before the step (its start less the previous step's end), the steps, the
live / priced ratio and the extra milliseconds. Pure reading: the figures are the
step logs'.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from nightjar.profile.model import load_profile
from nightjar.sim.price import StepPricer

GAPS = (-1.0, 0.1, 1.0, 1e9)  # seconds of idle before the step: bucket edges


def rows(bench: Path, pricer: StepPricer) -> pd.DataFrame:
    out = []
    for path in sorted(bench.glob("round-*/*/steps.csv")):
        policy = path.parent.name
        draft = not policy.startswith("nospec")
        steps = pd.read_csv(path)
        steps["idle_s"] = steps.time_s - (steps.time_s + steps.step_time_s).shift(1)
        prefill_only = steps[(steps.batch_size == 0) & (steps.prefill_tokens > 0)]
        cols = ("prefill_tokens", "gamma", "idle_s", "step_time_s")
        columns = [prefill_only[c].tolist() for c in cols]
        for tokens, gamma, idle, live in zip(*columns, strict=True):
            priced = pricer.price(0, 0, 0, 0.0, int(tokens), draft, False, 0, int(gamma), 0)[0]
            out.append((policy, int(tokens), idle, live, priced))
    return pd.DataFrame(out, columns=["policy", "tokens", "idle_s", "live_s", "priced_s"])


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit("usage: prefill_after_idle.py BENCH_DIR PROFILE")
    bench, profile = Path(sys.argv[1]), load_profile(sys.argv[2])
    df = rows(bench, StepPricer(profile))
    if df.empty:
        raise SystemExit(f"{bench}: no prefill-only step in any round's steps.csv")
    df["ratio"] = df.live_s / df.priced_s
    df["extra_ms"] = 1e3 * (df.live_s - df.priced_s)
    first = df.idle_s.isna()  # a run's first step: no step before it
    print(f"{bench}: {len(df)} prefill-only steps ({int(first.sum())} first of a run)")
    print("| idle before | steps | live / priced (median) | mean | extra ms (median) | "
          "live ms (mean) | priced ms (mean) |")
    print("|---|---|---|---|---|---|---|")
    buckets = pd.cut(df.idle_s, list(GAPS))
    for bucket, g in df.groupby(buckets, observed=True):
        lo, hi = bucket.left, bucket.right
        span = (f"over {lo:g} s" if hi > 1e8
                else f"up to {hi:g} s" if lo < 0 else f"{lo:g}-{hi:g} s")
        print(f"| {span} | {len(g)} | {g.ratio.median():.2f} | "
              f"{g.ratio.mean():.2f} | {g.extra_ms.median():.0f} | "
              f"{1e3 * g.live_s.mean():.0f} | {1e3 * g.priced_s.mean():.0f} |")
    long = df[df.idle_s > 1.0]
    if len(long) > 2:
        print(f"after > 1 s idle: correlation of the extra with the idle time "
              f"{long.extra_ms.corr(long.idle_s):.2f}")


if __name__ == "__main__":
    main()
