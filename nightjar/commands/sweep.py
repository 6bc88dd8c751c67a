"""``nightjar sweep``: simulate a grid of traces, rate scales, seeds, policies and settings.

Cells run on local processes (``--jobs``) or on Ray (``--ray``); each finished cell
is saved at once, so rerunning the same command with the same ``--out`` resumes
where it stopped and a finished sweep recomputes nothing. See docs/sweep.md.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.run.config import RunConfig

_D = RunConfig()  # the defaults every entry point shares (nightjar.run.config)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sweep", help="simulate a grid of settings (resumable; local or Ray)",
                       description=__doc__)
    p.add_argument("--config", type=Path, metavar="EXP.toml",
                   help="TOML file with the grid (flags override its keys); copied into --out")
    p.add_argument("--trace", action="append", metavar="NAME_OR_PATH",
                   help="trace, repeatable (default: burst)")
    p.add_argument("--rate-scale", action="append", metavar="S[,S...]",
                   help="arrival-rate multipliers, e.g. 0.5,1,2 (default 1)")
    p.add_argument("--burstiness", action="append", metavar="B[,B...]",
                   help="arrival gaps drawn as vLLM's bench draws them, gamma of shape B at"
                   " each trace's mean rate (1 = Poisson; default: the trace's own times)")
    p.add_argument("--seeds", type=int, metavar="N", help="seeds 0..N-1 (default 1)")
    p.add_argument("--policy", action="append", metavar="SPEC",
                   help=f"policy spec, repeatable (default: {' '.join(_D.policies)})")
    p.add_argument("--profile", action="append", metavar="NAME_OR_PATH",
                   help="profile, repeatable (default: the bundled A100 profile)")
    p.add_argument("--offload", metavar="auto,on,off",
                   help=f"elastic draft memory (default {_D.offload}: wherever the drafter has"
                   " weights to move)")
    p.add_argument("--reload", metavar="drain,migrate", help="reload mode (default drain)")
    p.add_argument("--draft-kv", metavar="sync,skip",
                   help=f"draft KV mode at gamma 0 (default {_D.draft_kv}; sync is vLLM's)")
    p.add_argument("--acceptance", metavar="geometric,positional",
                   help=f"acceptance model (default {_D.acceptance})")
    p.add_argument("--engine", metavar="v1,v0", help=f"scheduling (default {_D.engine})")
    p.add_argument("--prior", action="append", metavar="SPEC",
                   help="latency table the policies plan with, repeatable (default exact)")
    p.add_argument("--gamma-max", action="append", metavar="G[,G...]",
                   help=f"default {_D.gamma_max}")
    p.add_argument("--max-num-seqs", action="append", metavar="N[,N...]",
                   help=f"default {_D.max_num_seqs}")
    p.add_argument("--max-num-batched-tokens", action="append", metavar="N[,N...]",
                   help=f"default {_D.max_num_batched_tokens}")
    p.add_argument("--max-model-len", action="append", metavar="N[,N...]",
                   help="the most tokens a request may hold (default: no limit)")
    p.add_argument("--on-unfit", choices=["refuse", "skip"],
                   help=f"a request that can never fit: refuse or skip (default {_D.on_unfit})")
    p.add_argument("--slo-ttft", type=float, metavar="S",
                   help=f"TTFT limit in s (default {_D.slo_ttft:g})")
    p.add_argument("--slo-tpot", type=float, metavar="S",
                   help=f"TPOT limit in s (default {_D.slo_tpot:g})")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="local worker processes (default: the number of cores)")
    p.add_argument("--ray", metavar="auto|local|ADDRESS",
                   help="run cells on Ray: auto joins the running cluster, local starts one")
    p.add_argument("--out", type=Path, help="output folder; the same folder resumes a sweep")
    p.add_argument("--force", action="store_true",
                   help="write into a non-empty folder that is not a sweep")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def flag_values(args: argparse.Namespace) -> dict[str, Any]:
    """The grid keys the user gave as flags (absent flags stay out: the file decides)."""
    from nightjar.sweep.spec import parse_numbers, split_list

    out: dict[str, Any] = {"trace": args.trace, "policy": args.policy, "profile": args.profile,
                           "seeds": args.seeds, "slo_ttft": args.slo_ttft,
                           "slo_tpot": args.slo_tpot, "prior": args.prior,
                           "on_unfit": args.on_unfit}
    if args.rate_scale is not None:
        out["rate_scale"] = parse_numbers(args.rate_scale, "--rate-scale", float)
    if args.burstiness is not None:
        out["burstiness"] = parse_numbers(args.burstiness, "--burstiness", float)
    for name in ("gamma_max", "max_num_seqs", "max_num_batched_tokens", "max_model_len"):
        value = getattr(args, name)
        if value is not None:
            out[name] = parse_numbers(value, f"--{name.replace('_', '-')}", int)
    for name in ("offload", "reload", "draft_kv", "acceptance", "engine"):
        value = getattr(args, name)
        if value is not None:
            out[name] = split_list(value, f"--{name.replace('_', '-')}")
    return {k: v for k, v in out.items() if v is not None}


# Grids this large get a line before planning (a progress bar needs a terminal).
PLAN_NOTICE_CELLS = 20_000


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from nightjar.report.progress import LazyProgress
    from nightjar.sweep.report import paired_table, terminal_table
    from nightjar.sweep.run import run_sweep
    from nightjar.sweep.spec import build_spec, read_config

    if args.jobs < 1:
        raise NightjarInputError(f"--jobs must be >= 1, got {args.jobs}")
    file_values = read_config(args.config) if args.config is not None else None
    spec = build_spec(file_values, flag_values(args),
                      source=str(args.config) if args.config else "sweep")
    out = args.out or Path("reports") / f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    console = Console(stderr=True)
    if not args.quiet and spec.num_cells() >= PLAN_NOTICE_CELLS:
        # Planning a large grid takes seconds before the first cell (~0.1 ms a cell):
        # say so where no bar can be drawn too.
        console.print(f"nightjar sweep: planning {spec.num_cells()} cells", highlight=False)
    with LazyProgress(enabled=not args.quiet) as bar:
        started = False

        def on_plan(done: int, total: int) -> None:
            if "planning" not in bar:
                bar.add("planning", float(total))
            bar.update("planning", float(done))

        def on_cell(done: int, total: int) -> None:
            nonlocal started
            if not started:
                bar.add("cells", float(total))
                started = True
            bar.update("cells", float(done))

        try:
            outcome = run_sweep(spec, out, jobs=args.jobs, ray=args.ray, force=args.force,
                                config=args.config, report=not args.no_report,
                                on_cell=on_cell, on_plan=on_plan,
                                command=getattr(args, "invocation", None))
        except KeyboardInterrupt:
            if (out / "cells").is_dir():
                saved = len(list((out / "cells").glob("*.json")))
                console.print(f"{saved} finished cells are saved in {out}/; run the same "
                              f"command with --out {out} to resume", soft_wrap=True,
                              highlight=False)
            else:
                console.print(f"stopped before the first cell: nothing was written to {out}",
                              soft_wrap=True, highlight=False)
            raise
    if len(outcome.frame):
        Console().print(terminal_table(outcome.frame, f"sweep {out}"))
        pairs = paired_table(outcome.frame)
        if pairs is not None:
            Console().print(pairs)
    console.print(
        f"{len(outcome.frame)} cells: {outcome.computed} computed, {outcome.reused} reused"
        + (f", {len(outcome.failed)} failed" if outcome.failed else "")
    )
    for params, reason in outcome.failed:
        where = " ".join(f"{k}={params[k]}" for k in ("trace", "rate_scale", "seed", "policy"))
        console.print(f"failed cell {where}: {reason}", markup=False, highlight=False,
                      soft_wrap=True)
    console.print(f"wrote {out}/ (results.csv"
                  + (", results.parquet" if (out / "results.parquet").exists() else "")
                  + (", report.html" if not args.no_report else "") + ")")
    if outcome.failed:
        console.print("the failed cells were not saved; rerunning the sweep retries them")
        return 1
    return 0
