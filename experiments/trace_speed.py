"""Did the traces of an agreement measurement run in the same machine states? (issue 41)

A profile fitted from one trace's runs carries that trace's machine speed into the
held-out trace. For every run of every ``AGREE/bench-<trace>/`` this takes the run's
speed against the measured profile (``nightjar validate --time-base run``'s factor: the
median live / priced ratio of its pure decode steps; above 1, slower than the profile)
and prints, per trace, the mean speed with its 95% interval, and per round each
trace's mean, with the paired ratio between the first two traces (the rounds they
shared, or the same round numbers of back-to-back blocks). Reads files only.

    .venv/bin/python experiments/trace_speed.py AGREE [--profile P]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from nightjar.errors import NightjarInputError
from nightjar.fidelity.time_base import run_time_base
from nightjar.profile.profile import load_profile
from nightjar.results.bench import read_bench
from nightjar.results.stats import mean_interval


def speeds(bench: Path, profile_path: Path) -> dict[int, list[float]]:
    """Round -> the speed factor of each of its runs."""
    profile = load_profile(str(profile_path))
    record = read_bench(bench)
    sync = record.meta.get("draft_kv") == "sync"
    out: dict[int, list[float]] = {}
    for run in record.runs:
        out.setdefault(run.round, []).append(run_time_base(run.result, profile, sync))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("agree", type=Path)
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    profile = args.profile or args.agree / "profile.json"
    benches = sorted(p for p in args.agree.glob("bench-*") if (p / "bench.json").is_file())
    try:  # a missing or damaged input is a one-line error, as the CLI's are
        if not benches:
            raise NightjarInputError(f"{args.agree}: no bench-*/bench.json to read")
        by_trace = {b.name.removeprefix("bench-"): speeds(b, profile) for b in benches}
    except NightjarInputError as err:
        print(f"trace_speed: {err}", file=sys.stderr)
        return 2
    print(f"{args.agree}: each run's speed against {profile} (x > 1: slower than profiled)")
    for trace, rounds in by_trace.items():
        every = [x for xs in rounds.values() for x in xs]
        ci = mean_interval(every)
        per_round = ", ".join(f"r{r} x{statistics.fmean(xs):.3f}" for r, xs in rounds.items())
        print(f"  {trace}: x{ci.mean:.3f} ± {ci.half_width:.3f} over {len(every)} runs "
              f"(x{min(every):.2f}-x{max(every):.2f}); {per_round}")
    if len(by_trace) >= 2:
        (a, ra), (b, rb) = list(by_trace.items())[:2]
        shared = sorted(ra.keys() & rb.keys())
        ratios = [statistics.fmean(ra[r]) / statistics.fmean(rb[r]) for r in shared]
        ci = mean_interval(ratios)
        print(f"  {a} / {b}, round by round: x{ci.mean:.3f} ± {ci.half_width:.3f} over "
              f"{len(ratios)} rounds ({', '.join(f'x{x:.3f}' for x in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
