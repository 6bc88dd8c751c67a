"""``nightjar sim``: run policies over a trace in the simulator and report."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from nightjar.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.errors import NightjarInputError
from nightjar.policy import expand_specs, registered, within_gamma_max
from nightjar.profile import DEFAULT_PROFILE
from nightjar.slo_args import add_slo_args, slo_from_args

if TYPE_CHECKING:  # the simulator (simpy) is imported only when a run starts
    from nightjar.profile import Profile
    from nightjar.sim import SimConfig
    from nightjar.sim.fit import Fit, OnUnfit
    from nightjar.trace import Trace

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
    p.add_argument("--no-oracle", action="store_true", help="skip the oracle run used for regret")
    p.add_argument(
        "--max-model-len", type=int, default=None, metavar="N",
        help="the most tokens (prompt + output) a request may hold, as vLLM's"
        " max_model_len (default: no limit beyond the KV cache)",
    )
    p.add_argument(
        "--on-unfit", choices=["refuse", "skip"], default="refuse",
        help="a request that can never fit the KV cache: refuse the run (default) or skip"
        " it and count it as rejected",
    )
    p.add_argument("--out", type=Path, default=None, help="output folder (default: reports/<run>)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("--report-cdn", action="store_true",
                   help="load plotly.js from its CDN in the report (small file, needs network)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_slo_args(p)
    p.add_argument("--format", choices=["csv", "parquet"], default="csv",
                   help="tables as CSV (default) or parquet (needs pyarrow)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nightjar.outdir import default_out_dir, staged_out_dir
    from nightjar.output import require_format, write_all
    from nightjar.progress import LazyProgress
    from nightjar.results import ResultSet
    from nightjar.sim import simulate_many
    from nightjar.table import summary_table

    # Every input is checked before the first simulation and before any folder is
    # made, so a typo in the last --policy costs nothing and leaves nothing behind.
    slo = slo_from_args(args)
    require_format(args.format)
    plan = _plan(args)
    trace, profile, cfg, runs = plan.trace, plan.profile, plan.cfg, plan.runs
    out = args.out or default_out_dir(trace.name)
    console = Console()
    if plan.fit.rejected.size:
        console.print(
            f"skipping {plan.fit.rejected.size} request(s) that can never run "
            f"(--on-unfit skip): {plan.fit.message}", soft_wrap=True,
        )

    with staged_out_dir(out, args.force) as tmp:
        with LazyProgress(enabled=not args.quiet) as bar:
            for spec in runs:
                bar.add(spec, trace.duration_s)
            results = simulate_many(
                trace, profile, runs, cfg, progress=bar.update, on_unfit=plan.on_unfit
            )

        title = f"{trace.name} on {profile.name} ({len(trace)} requests, seed {args.seed})"
        result_set = ResultSet.build(results, title=title, gamma_max=args.gamma_max, slo=slo)
        console.print(summary_table(result_set.summaries, result_set.regrets, title=title))
        write_all(
            result_set, tmp, force=True, report=not args.no_report, report_cdn=args.report_cdn,
            fmt=args.format,
        )
    console.print(f"wrote {out}/")
    return 0


@dataclass(frozen=True)
class _Plan:
    trace: Trace
    profile: Profile
    cfg: SimConfig
    runs: list[str]
    on_unfit: OnUnfit
    fit: Fit


def _plan(args: argparse.Namespace) -> _Plan:
    """Load and check every input of a run; raises NightjarInputError on the first bad one."""
    from nightjar.profile import load_profile
    from nightjar.sim import (
        AcceptanceModel,
        DraftKVMode,
        OnUnfit,
        ReloadMode,
        SimConfig,
        check_policies,
        fit_or_refuse,
    )
    from nightjar.trace import load_trace
    from nightjar.trace_schema import MAX_SEED

    if args.gamma_max < 1:
        raise NightjarInputError(f"--gamma-max must be >= 1, got {args.gamma_max}")
    if not 0 <= args.seed <= MAX_SEED:
        raise NightjarInputError(f"--seed must be in 0..{MAX_SEED}, got {args.seed}")
    if args.max_model_len is not None and args.max_model_len < 1:
        raise NightjarInputError(f"--max-model-len must be >= 1, got {args.max_model_len}")
    if args.reload == "migrate" and args.offload != "on":
        raise NightjarInputError("--reload migrate needs --offload on (no draft reload without it)")
    trace = load_trace(args.trace)
    profile = load_profile(args.profile or DEFAULT_PROFILE)
    if args.gamma_max > profile.gamma_max:
        raise NightjarInputError(
            f"--gamma-max {args.gamma_max} exceeds the profile's table"
            f" (gamma <= {profile.gamma_max})"
        )
    defaults = [s for s in DEFAULT_POLICIES if _known(s) and within_gamma_max(s, args.gamma_max)]
    specs = expand_specs(args.policies or defaults, args.gamma_max)
    with_oracle = not args.no_oracle and "oracle" in registered()
    runs = specs + (["oracle"] if with_oracle and "oracle" not in specs else [])
    cfg = SimConfig(
        seed=args.seed, gamma_max=args.gamma_max, draft_kv_mode=DraftKVMode(args.draft_kv),
        acceptance_model=AcceptanceModel(args.acceptance), offload=args.offload == "on",
        reload_mode=ReloadMode(args.reload), max_model_len=args.max_model_len,
    )
    check_policies(runs, trace, profile, cfg)
    on_unfit = OnUnfit(args.on_unfit)
    fit = fit_or_refuse(trace, profile, cfg, on_unfit)
    return _Plan(trace, profile, cfg, runs, on_unfit, fit)


def _known(spec: str) -> bool:
    return spec.partition(":")[0] in registered()
