"""`nightjar+` against one other run on seeds of your choosing, paired per seed.

    python experiments/paired_seeds.py PROFILE TRACE[,TRACE...] OTHER --seeds 25:45

The same runs as ``experiments/memory_default.py`` (default settings, each seed
re-drawing the trace's arrivals and acceptance rates, :func:`memory_default.run_group`),
on a seed range that table never used: a separated cell of that table, or one a change
was designed on, checked where nobody looked. Prints per trace ``nightjar+`` minus
OTHER on mean E2E and throughput, in % of OTHER's mean, with the 95% interval of the
paired differences and whether it excludes zero.
"""

from __future__ import annotations

import argparse
import sys
from concurrent.futures import ProcessPoolExecutor

from memory_default import run_group  # the sibling script in this folder

METRICS = (("e2e_s_mean", "mean E2E"), ("throughput_tok_s", "throughput"))


def seed_range(text: str) -> range:
    first, _, end = text.partition(":")
    return range(int(first), int(end))


def main(argv: list[str] | None = None) -> int:
    from nightjar.results.stats import mean_interval

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile")
    ap.add_argument("traces", help="comma-separated bundled traces")
    ap.add_argument("other", help="the run nightjar+ is paired against, e.g. fixed:1")
    ap.add_argument("--seeds", type=seed_range, default=range(25, 45), help="FIRST:END")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    traces = args.traces.split(",")
    jobs = [(args.profile, t, s, ("nightjar+", args.other)) for t in traces for s in args.seeds]
    with ProcessPoolExecutor(args.jobs) as pool:
        rows = [r for group in pool.map(run_group, jobs) for r in group]
    print(f"nightjar+ minus {args.other}, {args.profile}, seeds "
          f"{args.seeds.start}..{args.seeds.stop - 1}, % of {args.other}'s mean")
    for trace in traces:
        parts = [trace]
        for key, name in METRICS:
            by: dict[object, dict[object, float]] = {}
            for r in rows:
                if r["trace"] == trace:
                    by.setdefault(r["seed"], {})[r["policy"]] = float(str(r[key]))
            diff = mean_interval([v["nightjar+"] - v[args.other] for v in by.values()])
            base = sum(v[args.other] for v in by.values()) / len(by)
            sep = "separated" if diff.lo > 0 or diff.hi < 0 else "not separated"
            parts.append(f"{name} {100 * diff.mean / base:+.3f} ± "
                         f"{100 * diff.half_width / base:.3f} ({sep})")
        print(" | ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
