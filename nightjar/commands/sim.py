"""``nightjar sim``: run policies over a trace in the simulator and report."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from nightjar.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.errors import NightjarInputError
from nightjar.policy import expand_specs, registered
from nightjar.profile import DEFAULT_PROFILE

DEFAULT_POLICIES = ("nospec", "fixed:1", "fixed:2", "fixed:3", "fixed:4", "nightjar", "nightjar+")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sim", help="simulate policies over a trace", description=__doc__)
    p.add_argument("--trace", default="burst", help="bundled trace name or path (default: burst)")
    p.add_argument("--profile", default=None,
                   help=f"bundled profile name or path (default: {DEFAULT_PROFILE})")
    p.add_argument(
        "--policy", action="append", dest="policies", metavar="SPEC",
        help="policy spec, repeatable (nospec, fixed:3, schedule:1-16:3,17-:0, nightjar, all);"
        f" default: {' '.join(DEFAULT_POLICIES)}",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of acceptance draws and policies")
    p.add_argument("--gamma-max", type=int, default=4,
                   help="longest speculation a policy may choose")
    p.add_argument("--draft-kv", choices=DRAFT_KV_MODES, default=DEFAULT_DRAFT_KV,
                   help="at gamma 0, keep the draft's KV in sync (vLLM's behaviour) or skip "
                   "the draft and rebuild its KV later")
    p.add_argument("--acceptance", choices=["geometric", "positional"], default="geometric",
                   help="accepted-drafts model (docs/simulator.md)")
    p.add_argument("--offload", choices=["on", "off"], default="off",
                   help="move the draft to host memory under KV pressure")
    p.add_argument("--reload", choices=["drain", "migrate"], default="drain",
                   help="how a reload takes back its KV blocks")
    p.add_argument("--engine", choices=["v1", "v0"], default="v1",
                   help="scheduling: v1 = vLLM V1 chunked prefill mixed with decodes under "
                   "the token budget (decodes first); v0 = prefill-only steps, as the paper's "
                   "engine (docs/simulator.md)")
    p.add_argument("--max-num-batched-tokens", type=int, default=8192,
                   help="tokens one step may schedule, decodes and prompt chunks together")
    p.add_argument("--max-num-seqs", type=int, default=256,
                   help="running requests at most (capped at the profile's largest batch)")
    p.add_argument("--no-oracle", action="store_true", help="skip the oracle run used for regret")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: reports/<run>)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("--report-cdn", action="store_true",
                   help="load plotly.js from its CDN in the report (small file, needs network)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nightjar.output import write_all
    from nightjar.profile import DEFAULT_PROFILE, load_profile
    from nightjar.progress import LazyProgress
    from nightjar.results import ResultSet
    from nightjar.sim import (
        AcceptanceModel,
        DraftKVMode,
        ReloadMode,
        SchedulerMode,
        SimConfig,
        simulate_many,
    )
    from nightjar.table import summary_table
    from nightjar.trace import load_trace

    if args.gamma_max < 1:
        raise NightjarInputError(f"--gamma-max must be >= 1, got {args.gamma_max}")
    if args.max_num_batched_tokens < 1 or args.max_num_seqs < 1:
        raise NightjarInputError("--max-num-batched-tokens and --max-num-seqs must be >= 1")
    trace = load_trace(args.trace)
    profile = load_profile(args.profile or DEFAULT_PROFILE)
    if args.gamma_max > profile.gamma_max:
        raise NightjarInputError(
            f"--gamma-max {args.gamma_max} exceeds the profile's table"
            f" (gamma <= {profile.gamma_max})"
        )
    specs = expand_specs(args.policies or [s for s in DEFAULT_POLICIES if _known(s)])
    with_oracle = not args.no_oracle and "oracle" in registered()
    runs = specs + (["oracle"] if with_oracle and "oracle" not in specs else [])
    out = args.out or Path("reports") / f"{trace.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    cfg = SimConfig(
        seed=args.seed, gamma_max=args.gamma_max, draft_kv_mode=DraftKVMode(args.draft_kv),
        acceptance_model=AcceptanceModel(args.acceptance), offload=args.offload == "on",
        reload_mode=ReloadMode(args.reload), engine=SchedulerMode(args.engine),
        max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs,
    )
    # Fail on an unwritable folder before spending time simulating.
    from nightjar.output import prepare_out_dir

    prepare_out_dir(out, args.force)

    with LazyProgress(enabled=not args.quiet) as bar:
        for spec in runs:
            bar.add(spec, trace.duration_s)
        results = simulate_many(trace, profile, runs, cfg, progress=bar.update)

    title = f"{trace.name} on {profile.name} ({len(trace)} requests, seed {args.seed})"
    result_set = ResultSet.build(results, title=title, gamma_max=args.gamma_max)
    console = Console()
    console.print(summary_table(result_set.summaries, result_set.regrets, title=title))
    write_all(
        result_set, out, force=True, report=not args.no_report, report_cdn=args.report_cdn
    )
    console.print(f"wrote {out}/")
    return 0


def _known(spec: str) -> bool:
    return spec.partition(":")[0] in registered()
