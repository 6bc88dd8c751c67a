"""``nightjar validate``: replay a live run in the simulator and report the gap."""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from nightjar.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.errors import NightjarInputError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "validate", help="compare a live run with the simulator on the same trace",
        description="Rebuild the trace a live run served (arrivals, lengths, measured "
        "acceptance), simulate the same policy on PROFILE, and compare step times and "
        "end-to-end metrics.",
    )
    p.add_argument("--live-run", type=Path, required=True,
                   help="a run folder written by `nightjar live --out DIR` (DIR/<policy>)")
    p.add_argument("--profile", required=True, help="bundled profile name or path")
    p.add_argument("--gamma-max", type=int, default=4, help="longest speculation in the simulator")
    p.add_argument("--draft-kv", choices=DRAFT_KV_MODES, default=DEFAULT_DRAFT_KV,
                   help="the live run's draft-KV mode")
    p.add_argument("--seed", type=int, default=0, help="simulator seed")
    p.add_argument("--out", type=Path, default=None, help="write validation CSVs here")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nightjar.outdir import staged_out_dir
    from nightjar.profile import load_profile
    from nightjar.sim import DraftKVMode, SimConfig, simulate
    from nightjar.trace_schema import MAX_SEED
    from nightjar.validate import compare_summaries, load_run, step_model_error, trace_of

    if args.gamma_max < 1:
        raise NightjarInputError(f"--gamma-max must be >= 1, got {args.gamma_max}")
    if not 0 <= args.seed <= MAX_SEED:
        raise NightjarInputError(f"--seed must be in 0..{MAX_SEED}, got {args.seed}")
    live = load_run(args.live_run)
    if live.engine != "live":
        Console(stderr=True).print(f"note: {args.live_run} was written by the {live.engine} engine")
    profile = load_profile(args.profile)
    staged = staged_out_dir(args.out, args.force) if args.out is not None else nullcontext(None)
    with staged as tmp:
        steps = step_model_error(live, profile)
        sim = simulate(trace_of(live), profile, live.policy,
                       SimConfig(seed=args.seed, gamma_max=args.gamma_max,
                                 draft_kv_mode=DraftKVMode(args.draft_kv)))
        summary = compare_summaries(live, sim)

        console = Console()
        console.print(
            f"step-time model on {steps.steps} pure decode steps: median |error| "
            f"{steps.median_abs_pct:.1f}%, mean error {steps.mean_pct:+.1f}% "
            "(> 0: the profile predicts slower than measured)"
            + (f"; {steps.clamped} steps outside the table, priced at its edge"
               if steps.clamped else "")
        )
        console.print(_table(steps.by_bucket, "step time by batch size and gamma"))
        console.print(_table(summary, f"{live.policy}: live vs sim on {live.trace}"))
        if tmp is not None:
            steps.by_bucket.to_csv(tmp / "step_model.csv", index=False)
            summary.to_csv(tmp / "summary_comparison.csv", index=False)
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
