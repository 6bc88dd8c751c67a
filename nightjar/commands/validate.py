"""``nightjar validate``: replay a live run in the simulator and report the gap."""

from __future__ import annotations

import argparse
import dataclasses
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from nightjar.commands.run_flags import add_run_flags, run_config
from nightjar.commands.validate_common import (
    LIVE_RUN_FIELDS,
    check_binding,
    live_offload,
    run_bindings,
    table,
)
from nightjar.errors import NightjarInputError
from nightjar.run.config import (
    LIVE_GAMMA_MAX,
    LIVE_MAX_NUM_BATCHED_TOKENS,
    LIVE_MAX_NUM_SEQS,
    flag_of,
)

LIVE_DEFAULTS = {"gamma_max": LIVE_GAMMA_MAX, "max_num_seqs": LIVE_MAX_NUM_SEQS,
                 "max_num_batched_tokens": LIVE_MAX_NUM_BATCHED_TOKENS}


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "validate", help="compare a live run with the simulator on the same trace",
        description="Rebuild the trace a live run served (arrivals, lengths, measured "
        "acceptance), simulate the same policy on PROFILE, and compare step times and "
        "end-to-end metrics.",
    )
    p.add_argument("--live-run", type=Path, required=True, action="append",
                   help="a run folder written by `nightjar live --out DIR` (DIR/<policy>), "
                   "or DIR itself: every policy in it, with the ranking check; give it "
                   "again for repeats of the same runs (means and 95%% intervals)")
    p.add_argument("--profile", required=True, help="bundled profile name or path")
    p.add_argument("--any-binding", action="store_true",
                   help="compare even when the live runs and a measured profile ran under "
                   "different CPU thread bindings (by default refused: the profile would "
                   "price every step of the run wrong)")
    p.add_argument("--time-base", choices=("profile", "round", "run"), default="profile",
                   help="round (a benchmark folder only): price each run at its machine's "
                   "speed, the profile scaled by its round's reference runs (the noise "
                   "twins); run: each run at its own speed, the profile scaled by the "
                   "run's own pure decode steps; profile: at the profile's own")
    # The simulator settings that describe the live run, with `nightjar live`'s defaults.
    add_run_flags(p, only=LIVE_RUN_FIELDS, defaults=LIVE_DEFAULTS)
    p.add_argument("--out", type=Path, default=None, help="write validation CSVs here")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nightjar.fidelity.compare import (
        agreement,
        compare_summaries,
        step_model_error,
        step_replay,
        trace_of,
    )
    from nightjar.fidelity.time_base import run_time_base
    from nightjar.profile.profile import load_profile
    from nightjar.results.bench import is_bench
    from nightjar.results.outdir import check_out_dir, staged_out_dir
    from nightjar.results.read import load_runs
    from nightjar.run.prepare import settle
    from nightjar.sim import servable, simulate

    if any(is_bench(folder) for folder in args.live_run):
        from nightjar.commands.validate_bench import run_bench_validation

        return run_bench_validation(args)
    if args.time_base == "round":
        raise NightjarInputError("--time-base round needs a benchmark folder "
                                 "(`nightjar bench live --out DIR`): its rounds' reference runs")
    # Every input before any output: the settings, the profile, the runs, the CPU
    # bindings, --out.
    config = run_config(args, only=LIVE_RUN_FIELDS)
    profile = load_profile(args.profile)
    runs = [run for folder in args.live_run for run in load_runs(folder)]
    config = dataclasses.replace(config, offload=live_offload(runs))
    cfg = settle(config, profile, spell=flag_of).knobs
    for live in runs:  # a request the profile's pool can never hold fails here, not later
        servable(trace_of(live), profile, cfg)
    sync = args.draft_kv == "sync"
    # Each run's own speed (--time-base run), or the profile's: known before any output.
    bases = [None if args.time_base == "profile" else run_time_base(live, profile, sync)
             for live in runs]
    if args.out is not None:
        check_out_dir(args.out, args.force)
    console = Console()
    for folder in args.live_run:
        check_binding(profile, run_bindings(folder), args.any_binding, console)
    for live in runs:
        if live.engine != "live":
            Console(stderr=True).print(
                f"note: the {live.policy} run was written by the {live.engine} engine"
            )
    if args.max_num_seqs > profile.max_batch_size:
        console.print(f"note: the profile's largest batch is {profile.max_batch_size}; "
                      f"larger ones (up to {args.max_num_seqs}) are priced along its last "
                      "segment")
    staged = staged_out_dir(args.out, args.force) if args.out is not None else nullcontext(None)
    with staged as tmp:
        pairs = []
        seen: dict[str, int] = {}
        for live, base in zip(runs, bases, strict=True):
            seen[live.policy] = seen.get(live.policy, 0) + 1
            prof = profile
            if base is not None:
                prof = profile.scaled(base)
                console.print(f"{live.policy}: priced on the profile times its own time "
                              f"base, x{base:.3f}")
            sim = simulate(trace_of(live), prof, live.policy, cfg)
            pairs.append((live, sim))
            summary = compare_summaries(live, sim)
            try:
                steps = step_model_error(live, prof)
            except NightjarInputError as exc:
                if len(runs) == 1:
                    raise
                console.print(f"{live.policy}: no step-model check ({exc})")
            else:
                console.print(
                    f"{live.policy}: step-time model on {steps.steps} pure decode steps: "
                    f"median |error| {steps.median_abs_pct:.1f}%, mean error "
                    f"{steps.mean_pct:+.1f}% (> 0: the profile predicts slower than measured)"
                    + (f"; {steps.clamped} steps outside the table, priced off its grid"
                       if steps.clamped else "")
                )
                console.print(_table(steps.by_bucket, "step time by batch size and gamma"))
                if tmp is not None and len(runs) == 1:
                    steps.by_bucket.to_csv(tmp / "step_model.csv", index=False)
            replay = step_replay(live, prof, sync)
            console.print(_table(replay, f"{live.policy}: every live step priced by the "
                                 "simulator (same composition)"))
            console.print(_table(summary, f"{live.policy}: live vs sim on {live.trace}"))
            if tmp is not None:
                name = "" if len(runs) == 1 else "-" + live.policy.replace(":", "-")
                if seen[live.policy] > 1:
                    name += f"-{seen[live.policy]}"
                summary.to_csv(tmp / f"summary_comparison{name}.csv", index=False)
                replay.to_csv(tmp / f"step_replay{name}.csv", index=False)
        if len(pairs) > 1:
            agree = agreement(pairs)
            console.print(_table(agree.errors, "agreement: live vs sim per policy"))
            console.print(_table(agree.ranking, "ranking: best first"))
            console.print(_table(agree.pairs, "pairs the engine separated (repeats paired by "
                                 "their order; unresolved pairs are no miss)"))
            console.print("the simulator orders every pair the engine separated as the engine "
                          "did: " + ("yes" if agree.same_ranking else "NO")
                          + f" ({agree.separated} of {len(agree.pairs)} pairs separated)")
            if tmp is not None:
                agree.errors.to_csv(tmp / "agreement.csv", index=False)
                agree.ranking.to_csv(tmp / "ranking.csv", index=False)
            _yardsticks(pairs, console)
    if args.out is not None:
        console.print(f"wrote {args.out}/")
    return 0


def _yardsticks(pairs: list[tuple[Any, Any]], console: Console) -> None:
    """The full-system regret on each side: does the simulator name the same best
    alternative, and put each adaptive run as far from it, as the engine?"""
    from nightjar.report.alt_lines import alternative_lines, entries
    from nightjar.results.run_set import ResultSet

    for side, runs in (("live", [p[0] for p in pairs]), ("simulated", [p[1] for p in pairs])):
        lines = alternative_lines(entries(ResultSet.build(runs, oracle_policy=None)))
        if lines:
            console.print(f"{side}: " + lines[0], highlight=False)
            for line in lines[1:]:
                console.print(line, highlight=False)


def _table(frame: Any, title: str) -> Table:
    return table(frame, title)
