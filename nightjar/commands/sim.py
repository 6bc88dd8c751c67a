"""``nightjar sim``: run policies over a trace in the simulator and report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from nightjar.commands.run_flags import add_run_flags, run_config
from nightjar.errors import NightjarInputError
from nightjar.profile.profile import DEFAULT_PROFILE
from nightjar.run.config import flag_of
from nightjar.trace.schema import MAX_SEED

if TYPE_CHECKING:  # the simulator (simpy) is imported only when a run starts
    from nightjar.profile.profile import Profile
    from nightjar.run.prepare import PreparedRun
    from nightjar.trace.trace import Trace

# More repeats than this is a typo: each seed reruns every policy.
MAX_SEEDS = 10_000


def add_parser(sub: Any) -> None:
    p = sub.add_parser("sim", help="simulate policies over a trace", description=__doc__)
    p.add_argument("--trace", default="burst", help="bundled trace name or path (default: burst)")
    p.add_argument("--profile", default=None,
                   help=f"bundled profile name or path (default: {DEFAULT_PROFILE})")
    add_run_flags(p, gamma_from_profile=True)
    p.add_argument(
        "--request-rate", type=float, default=None, metavar="R",
        help="requests per second on average, as vLLM's bench spells it: the trace's"
        " arrivals scaled so that its mean rate (requests over its span) is R; instead of"
        " --rate-scale; the trace's pattern is kept (with --burstiness B, arrivals drawn"
        " as vLLM's bench draws them at R)")
    p.add_argument(
        "--seeds", type=int, default=1, metavar="N",
        help="repeat over seeds SEED..SEED+N-1 and report means with 95%% intervals",
    )
    p.add_argument("--out", type=Path, default=None, help="output folder (default: reports/<run>)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument("--report-cdn", action="store_true",
                   help="load plotly.js from its CDN in the report (small file, needs network)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--format", choices=["csv", "parquet"], default="csv",
                   help="tables as CSV (default) or parquet (needs pyarrow)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nightjar.results.outdir import default_out_dir, staged_out_dir
    from nightjar.results.write import require_format

    # Every input is checked before the first simulation and before any folder is
    # made, so a typo in the last --policy costs nothing and leaves nothing behind.
    require_format(args.format)
    plan = _plan(args)
    out = args.out or default_out_dir(plan.trace.name)
    console = Console()
    if plan.fit is not None and plan.fit.rejected.size:
        console.print(
            f"skipping {plan.fit.rejected.size} request(s) that can never run "
            f"(--on-unfit skip): {plan.fit.message}", soft_wrap=True,
        )
    if plan.fit is not None and plan.fit.capped.size:
        console.print(plan.fit.cut_note(), soft_wrap=True)
    with staged_out_dir(out, args.force) as tmp:
        if args.seeds == 1:
            _one_seed(args, plan, tmp, console)
        else:
            _many_seeds(args, plan, tmp, console)
    console.print(f"wrote {out}/")
    return 0


def _plan(args: argparse.Namespace) -> PreparedRun:
    """Load and check every input of a run; raises NightjarInputError on the first bad one."""
    from nightjar.profile.profile import load_profile
    from nightjar.run.prepare import prepare
    from nightjar.trace.trace import load_trace

    if not 1 <= args.seeds <= MAX_SEEDS:
        raise NightjarInputError(f"--seeds must be in 1..{MAX_SEEDS}, got {args.seeds}")
    trace = load_trace(args.trace)
    if args.request_rate is not None:
        args.rate_scale = rate_scale_for(trace, args.request_rate, args.rate_scale)
    config = run_config(args)
    if config.seed > MAX_SEED - args.seeds + 1:
        raise NightjarInputError(f"--seed must be in 0..{MAX_SEED} for every seed, got {args.seed}")
    return prepare(config, trace, load_profile(args.profile or DEFAULT_PROFILE),
                   gamma_given=args.gamma_max is not None, spell=flag_of)


def rate_scale_for(trace: Trace, request_rate: float, rate_scale: float) -> float:
    """The rate scale that gives ``trace`` a mean rate of ``request_rate`` req/s."""
    if rate_scale != 1.0:
        raise NightjarInputError("give --request-rate or --rate-scale, not both")
    return trace.scale_for_rate(request_rate)


def _simulate(args: argparse.Namespace, plan: PreparedRun, title: str, *,
              trace: Trace | None = None, seed: int | None = None) -> Any:
    """Every run of one seed, as a :class:`nightjar.results.run_set.ResultSet`."""
    from nightjar.report.progress import LazyProgress

    with LazyProgress(enabled=not args.quiet) as bar:
        for spec in plan.specs:
            bar.add(spec, (trace or plan.trace).duration_s)
        results = plan.simulate(bar.update, trace=trace, seed=seed,
                                command=getattr(args, "invocation", None))
    return plan.result_set(results, title)


def _title(args: argparse.Namespace, trace: Trace, profile: Profile, seeds: str,
           requests: str | None = None) -> str:
    prior = "" if args.prior == "exact" else f", prior {args.prior}"
    rate = "" if args.rate_scale == 1.0 else f", rate x{args.rate_scale:.4g}"
    if getattr(args, "request_rate", None) is not None:
        rate = f", {args.request_rate:g} req/s"
    count = requests if requests is not None else str(len(trace))
    return f"{trace.name} on {profile.name} ({count} requests, {seeds}{rate}{prior})"


def _one_seed(
    args: argparse.Namespace, plan: PreparedRun, out: Path, console: Console
) -> None:
    from nightjar.report.alt_lines import alternative_lines, entries
    from nightjar.report.folder import write_all
    from nightjar.report.terminal import summary_table

    title = _title(args, plan.trace, plan.profile, f"seed {args.seed}")
    result_set = _simulate(args, plan, title)
    console.print(summary_table(result_set.summaries, result_set.yardsticks, title=title))
    for line in alternative_lines(entries(result_set), result_set.missing):
        console.print(line, highlight=False)
    write_all(
        result_set, out, force=True, report=not args.no_report, report_cdn=args.report_cdn,
        fmt=args.format,
    )


def _many_seeds(
    args: argparse.Namespace, plan: PreparedRun, out: Path, console: Console
) -> None:
    """Seed i re-draws a generative trace's arrivals (its file seed + i - SEED), the
    per-request acceptance rates and the sampled accepts; each seed's runs go to
    ``seed-<i>/`` (the HTML report for the first seed only), the per-seed rows and
    intervals to the top of ``out``."""

    from nightjar.report.alt_lines import alternative_lines, entries
    from nightjar.report.folder import write_all
    from nightjar.report.terminal import interval_table, yardstick_caption
    from nightjar.results.multiseed import (
        aggregate,
        seed_rows,
        verdicts,
        write_seed_files,
    )
    from nightjar.run.prepare import arrivals
    from nightjar.trace.trace import load_trace

    rows = []
    counts: list[int] = []  # requests per seed: a generative trace re-draws its arrivals
    alts = []
    missing: tuple[str, ...] = ()
    yards: dict[str, Any] = {}
    last = args.seed + args.seeds - 1
    for seed in range(args.seed, last + 1):
        trace_s = arrivals(load_trace(args.trace, seed=plan.trace.seed + seed - args.seed),
                           plan.config, seed)
        title = _title(args, trace_s, plan.profile, f"seed {seed}")
        result_set = _simulate(args, plan, title, trace=trace_s, seed=seed)
        alts += entries(result_set)
        missing = result_set.missing
        counts.append(len(trace_s))
        mine = seed_rows(seed, result_set.summaries, result_set.regrets, result_set.yardsticks,
                         result_set.alternatives)
        for row, run in zip(mine, result_set.runs, strict=True):
            row.update(run.result.provenance)
        rows += mine
        for y in result_set.yardsticks.values():
            yards.setdefault(f"{y.policy}@{seed}", y)
        write_all(
            result_set, out / f"seed-{seed}", force=True,
            report=not args.no_report and seed == args.seed, report_cdn=args.report_cdn,
            fmt=args.format,
        )
    agg = aggregate(rows)
    write_seed_files(rows, agg, out, args.format)
    lo, hi = min(counts), max(counts)
    title = _title(args, plan.trace, plan.profile, f"seeds {args.seed}..{last}, mean ± 95% CI",
                   requests=f"{lo}" if lo == hi else f"{lo}-{hi}")
    console.print(interval_table(agg, title=title, caption=yardstick_caption(yards) or None))
    lines = [line for key in ("throughput_tok_s", "e2e_s_mean") for line in verdicts(rows, agg,
                                                                                     key)]
    lines += alternative_lines(alts, missing)
    for line in lines:
        console.print(line, highlight=False)
    if not args.no_report:
        from nightjar.report.seeds_page import write_seeds_page

        write_seeds_page(out / "report.html", agg, title, lines,
                         [f"seed-{args.seed}/report.html"])
