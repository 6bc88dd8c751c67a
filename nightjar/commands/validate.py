"""``nightjar validate``: replay a live run in the simulator and report the gap."""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from nightjar.core.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.errors import NightjarInputError


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
    p.add_argument("--gamma-max", type=int, default=4, help="longest speculation in the simulator")
    p.add_argument("--draft-kv", choices=DRAFT_KV_MODES, default=DEFAULT_DRAFT_KV,
                   help="the live run's draft-KV mode")
    p.add_argument("--seed", type=int, default=0, help="simulator seed")
    p.add_argument("--engine", choices=["v1", "v0"], default="v1",
                   help="simulator scheduling (v1: vLLM V1 chunked prefill, as the live engine)")
    p.add_argument("--max-num-seqs", type=int, default=64,
                   help="the live run's max_num_seqs (default: `nightjar live`'s 64)")
    p.add_argument("--max-num-batched-tokens", type=int, default=2048,
                   help="the live run's token budget (default: vLLM's 2048, what "
                   "`nightjar live` runs with)")
    p.add_argument("--out", type=Path, default=None, help="write validation CSVs here")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nightjar.profile.model import load_profile
    from nightjar.results.outdir import staged_out_dir
    from nightjar.results.read import load_runs
    from nightjar.sim import DraftKVMode, SchedulerMode, SimConfig, simulate
    from nightjar.trace.schema import MAX_SEED
    from nightjar.validate import (
        agreement,
        compare_summaries,
        step_model_error,
        step_replay,
        trace_of,
    )

    if args.gamma_max < 1:
        raise NightjarInputError(f"--gamma-max must be >= 1, got {args.gamma_max}")
    if not 0 <= args.seed <= MAX_SEED:
        raise NightjarInputError(f"--seed must be in 0..{MAX_SEED}, got {args.seed}")
    if args.max_num_seqs < 1 or args.max_num_batched_tokens < 1:
        raise NightjarInputError("--max-num-seqs and --max-num-batched-tokens must be >= 1")
    runs = [run for folder in args.live_run for run in load_runs(folder)]
    for live in runs:
        if live.engine != "live":
            Console(stderr=True).print(
                f"note: the {live.policy} run was written by the {live.engine} engine"
            )
    profile = load_profile(args.profile)
    cfg = SimConfig(seed=args.seed, gamma_max=args.gamma_max,
                    draft_kv_mode=DraftKVMode(args.draft_kv), engine=SchedulerMode(args.engine),
                    max_num_seqs=args.max_num_seqs,
                    max_num_batched_tokens=args.max_num_batched_tokens)
    console = Console()
    from nightjar.profile.check import warning

    check = warning(profile.to_json())
    if check:
        console.print(check, markup=False)
    if args.max_num_seqs > profile.max_batch_size:
        console.print(f"note: the profile's largest batch is {profile.max_batch_size}; the "
                      f"simulator runs at most that many requests (live: {args.max_num_seqs})")
    staged = staged_out_dir(args.out, args.force) if args.out is not None else nullcontext(None)
    with staged as tmp:
        pairs = []
        seen: dict[str, int] = {}
        for live in runs:
            seen[live.policy] = seen.get(live.policy, 0) + 1
            sim = simulate(trace_of(live), profile, live.policy, cfg)
            pairs.append((live, sim))
            summary = compare_summaries(live, sim)
            try:
                steps = step_model_error(live, profile)
            except NightjarInputError as exc:
                if len(runs) == 1:
                    raise
                console.print(f"{live.policy}: no step-model check ({exc})")
            else:
                console.print(
                    f"{live.policy}: step-time model on {steps.steps} pure decode steps: "
                    f"median |error| {steps.median_abs_pct:.1f}%, mean error "
                    f"{steps.mean_pct:+.1f}% (> 0: the profile predicts slower than measured)"
                    + (f"; {steps.clamped} steps outside the table, priced at its edge"
                       if steps.clamped else "")
                )
                console.print(_table(steps.by_bucket, "step time by batch size and gamma"))
                if tmp is not None and len(runs) == 1:
                    steps.by_bucket.to_csv(tmp / "step_model.csv", index=False)
            replay = step_replay(live, profile, args.draft_kv == "sync")
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
            console.print("the simulator ranks the policies as the engine did: "
                          + ("yes" if agree.same_ranking else "NO"))
            if tmp is not None:
                agree.errors.to_csv(tmp / "agreement.csv", index=False)
                agree.ranking.to_csv(tmp / "ranking.csv", index=False)
    if args.out is not None:
        console.print(f"wrote {args.out}/")
    return 0


def _table(frame: Any, title: str) -> Table:
    table = Table(title=title)
    for col in frame.columns:
        table.add_column(str(col), justify="right")
    for row in frame.itertuples(index=False):
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
    return table
