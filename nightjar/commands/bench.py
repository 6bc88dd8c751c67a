"""``nightjar bench live``: policies on the real engine, in interleaved rounds, with intervals.

Each round runs every policy once (one of them twice: the noise floor), in an order
rotated by one place per round, on engines started once for the whole benchmark and
pinned to a set of cores; the machine's foreign load is sampled during every run and a
run others disturbed is run again. Per policy: means with 95% intervals; per pair:
the paired per-round difference, and "A beats B" only where its interval excludes 0.
vLLM is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from nightjar.commands.slo_args import add_slo_args, slo_from_args
from nightjar.core.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.errors import NightjarInputError
from nightjar.live.bench.limits import (
    BENCH_KV_GB,
    BENCH_MAX_MODEL_LEN,
    BENCH_POLICIES,
    BENCH_REPEATS,
    BENCH_RETRIES,
    MAX_FOREIGN_PCT,
)
from nightjar.run.config import LIVE_GAMMA_MAX, LIVE_MAX_NUM_BATCHED_TOKENS, LIVE_MAX_NUM_SEQS


def add_parser(sub: Any) -> None:
    top = sub.add_parser("bench", help="benchmark policies on the live engine (repeated, "
                         "interleaved, with intervals)", description=__doc__)
    kinds = top.add_subparsers(dest="bench_kind", required=True, parser_class=type(top))
    p = kinds.add_parser("live", help="the live benchmark (vLLM)", description=__doc__)
    p.add_argument("--model", required=True, help="preset, local directory or cached HF id")
    p.add_argument("--draft", default=None, help="draft model (default: the preset's)")
    p.add_argument("--trace", required=True, help="bundled trace name or path")
    p.add_argument("--policy", action="append", dest="policies", metavar="SPEC",
                   help=f"policy spec, repeatable; default: {' '.join(BENCH_POLICIES)}")
    p.add_argument("--repeats", type=int, default=BENCH_REPEATS,
                   help="rounds; every policy runs once per round (>= 2)")
    p.add_argument("--noise-policy", default=None, metavar="SPEC",
                   help="the policy run twice per round for the noise floor (default: the "
                   "first --policy; 'none' for no noise floor)")
    p.add_argument("--cores", default=None,
                   help="cores the engine is pinned to, e.g. 0-1 (default: every core this "
                   "process may use); its OpenMP threads are bound to them")
    p.add_argument("--max-foreign", type=float, default=MAX_FOREIGN_PCT, metavar="PCT",
                   help="run again when others used more than PCT%% of the engine's cores")
    p.add_argument("--retries", type=int, default=BENCH_RETRIES,
                   help="times a disturbed run is run again before it is kept, marked loaded")
    p.add_argument("--no-warmup", action="store_true", help="skip each engine's warm-up run")
    p.add_argument("--gamma-max", type=int, default=None,
                   help=f"longest speculation a policy may choose (default {LIVE_GAMMA_MAX}, "
                   "or the --profile's largest gamma where that is smaller)")
    p.add_argument("--draft-kv", choices=DRAFT_KV_MODES, default=DEFAULT_DRAFT_KV,
                   help="at gamma 0, keep the draft's KV in sync or skip the draft")
    p.add_argument("--profile", default=None,
                   help="step-time prior for nightjar+/dsd (a profile or a step table)")
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="multiply trace times by this")
    p.add_argument("--max-requests", type=int, default=None, help="replay the first N only")
    p.add_argument("--max-model-len", type=int, default=BENCH_MAX_MODEL_LEN,
                   help="vLLM max_model_len")
    p.add_argument("--max-num-seqs", type=int, default=LIVE_MAX_NUM_SEQS,
                   help="vLLM max_num_seqs (batch cap)")
    p.add_argument("--kv-cache-gb", type=float, default=BENCH_KV_GB,
                   help="KV pool size (GiB); the measured profiler's default")
    p.add_argument("--seed", type=int, default=0, help="seed of the policies, vLLM and prompts")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: reports/<run>)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.add_argument("--verbose", action="store_true", help="show vLLM's whole log")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_slo_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nightjar.live.bench.limits import bench_gamma_max, check_bench_numbers
    from nightjar.live.bench.rotation import BenchPlan
    from nightjar.live.binding import allowed_cores
    from nightjar.live.models import check_pair, default_draft, resolve_model, vocab_size
    from nightjar.live.policy_check import check_policies
    from nightjar.live.step_prior import checked_prior
    from nightjar.live.trace_fit import check_token_ids, first_requests
    from nightjar.live.version import check_vllm_version
    from nightjar.results.write import prepare_out_dir
    from nightjar.trace.trace import load_trace

    slo = slo_from_args(args)
    check_bench_numbers(args.time_scale, args.kv_cache_gb, args.retries, args.max_foreign,
                        args.gamma_max)
    plan = BenchPlan.asked(args.policies, args.repeats, args.noise_policy, BENCH_POLICIES)
    cores = allowed_cores(args.cores)
    profile = checked_prior(args.profile)
    args.gamma_max = bench_gamma_max(args.gamma_max, profile)
    check_vllm_version()
    check_policies(plan.policies, args.gamma_max)
    # --time-scale multiplies the trace's times: the trace itself is scaled, as
    # `nightjar live` scales it by --rate-scale, so every run replays the same times.
    trace = load_trace(args.trace).rate_scaled(1.0 / args.time_scale)
    if args.max_requests is not None:
        trace = first_requests(trace, args.max_requests)
    target = resolve_model(args.model, "model")
    draft_arg = args.draft or default_draft(args.model)
    draft = resolve_model(draft_arg, "draft") if draft_arg else None
    # Synthetic prompt ids come from the target's vocabulary (with a draft, the pair's).
    vocab = check_pair(target, draft) if draft else (vocab_size(target) or 32000)
    check_token_ids(trace, vocab, args.trace)
    out = args.out or _default_out(trace.name)
    prepare_out_dir(out, args.force)
    return _bench(args, plan, cores, trace, target, draft, vocab, profile, out, slo)


def _default_out(name: str) -> Path:
    from nightjar.results.outdir import default_out_dir

    return default_out_dir(f"bench-{name}")


def _bench(args: argparse.Namespace, plan: Any, cores: tuple[int, ...], trace: Any,
           target: str, draft: str | None, vocab: int, profile: str | None, out: Path,
           slo: Any) -> int:
    from rich.console import Console

    from nightjar.live import logs
    from nightjar.live.settings import LiveSettings

    console = Console(stderr=True)
    settings = LiveSettings(gamma_max=args.gamma_max, seed=args.seed, draft_kv=args.draft_kv,
                            profile=profile)
    per_run, how = _expected_run_s(trace, args, profile)
    console.print(
        f"nightjar bench: {plan.runs} runs ({plan.repeats} rounds x {len(plan.labels)}: "
        f"{', '.join(plan.labels)}) of {len(trace)} requests; expected about "
        f"{_minutes(plan.runs * (per_run + 4) + 120)} ({per_run:.0f} s a run, {how}; plus "
        "engine starts and warm-up)"
    )
    with logs.configured(out / "vllm.log", args.verbose) as log_file:
        from nightjar.live.bench.runner import pin
        from nightjar.live.binding import apply_binding, prior_binding
        from nightjar.live.engine_spec import prepare_env

        prepare_env()
        pin(cores)
        binding = apply_binding(1, cores)
        console.print(f"engine pinned to cores {list(cores)}; {binding.label}")
        recorded = prior_binding(profile)
        if recorded is not None and not recorded.same_as(binding):
            console.print(f"[bold red]warning:[/] the profile was measured with "
                          f"{recorded.label}; this benchmark runs {binding.label}: its prior "
                          "prices steps wrong")
        started = time.time()
        outcome = _measure(args, plan, cores, trace, target, draft, vocab, settings, out, console)
    return _report(args, plan, outcome, out, slo, binding, cores, trace, started, log_file,
                   console)


def _expected_run_s(trace: Any, args: argparse.Namespace, profile: str | None
                    ) -> tuple[float, str]:
    """Seconds one run should take: the simulator's nospec run on the ``--profile`` when
    it is a profile (an overload drains long after its last arrival), else the trace's
    span plus a tail."""
    span = float(trace.arrival_s.max() - trace.arrival_s.min()) if len(trace) else 0.0
    fallback = span * 1.3 + 10.0, "the trace's span and a tail"
    if profile is None:
        return fallback
    try:
        from nightjar.profile.profile import load_profile
        from nightjar.sim import SimConfig, simulate

        prof = load_profile(profile)
        cfg = SimConfig(gamma_max=min(args.gamma_max, prof.gamma_max),
                        max_num_seqs=args.max_num_seqs,
                        max_num_batched_tokens=LIVE_MAX_NUM_BATCHED_TOKENS)
        run = simulate(trace, prof, "nospec", cfg)
    except NightjarInputError:  # a step table, or a trace the profile cannot serve
        return fallback
    return max(run.duration_s, span) + 3.0, "nospec simulated on --profile"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _measure(args: argparse.Namespace, plan: Any, cores: tuple[int, ...], trace: Any,
             target: str, draft: str | None, vocab: int, settings: Any, out: Path,
             console: Any) -> Any:
    from nightjar.live.bench.runner import BenchSetup, engine_specs, run_bench
    from nightjar.live.engine_spec import EngineSpec
    from nightjar.live.replay import ReplayOptions
    from nightjar.report.progress import LazyProgress

    base = EngineSpec(
        target=target, draft=draft, settings=settings, max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs, kv_cache_bytes=int(args.kv_cache_gb * 2**30),
        spec_tokens=args.gamma_max, load_progress=args.verbose,
        max_num_batched_tokens=LIVE_MAX_NUM_BATCHED_TOKENS,
    )
    with_draft, plain = engine_specs(base, plan)
    setup = BenchSetup(
        trace=trace, draft_engine=with_draft, plain_engine=plain,
        options=ReplayOptions(vocab, args.seed), cores=cores,
        workdir=out / ".steps", max_foreign_pct=args.max_foreign, retries=args.retries,
        warmup=not args.no_warmup,
    )
    with LazyProgress(enabled=not args.quiet, show_after_s=0.0) as bar:

        def report(kind: str, *what: Any) -> None:
            if kind == "warmup":
                bar.print(f"warmed up {what[0]}")
            elif kind == "retry":
                slot, pct = what
                bar.print(f"[yellow]round {slot.round} {slot.label}: others used {pct:.0f}% "
                          "of the engine's cores; running it again[/]")
            else:
                r = what[0]
                mark = " [red]LOADED[/]" if r.loaded else ""
                bar.print(f"round {r.slot.round}/{plan.repeats} {r.slot.label}: "
                          f"{r.wall_s:.0f} s; {r.load.summary}{mark}")

        def progress(slot: Any, done: int) -> None:
            label = f"round {slot.round}/{plan.repeats} {slot.label}"
            if label not in bar:
                bar.add(label, float(len(trace)))
            bar.update(label, float(done))

        return run_bench(setup, plan, report, None if args.quiet else progress)


def _report(args: argparse.Namespace, plan: Any, outcome: Any, out: Path, slo: Any,
            binding: Any, cores: tuple[int, ...], trace: Any, started: float, log_file: Any,
            console: Any) -> int:
    from rich.console import Console

    from nightjar.report.alt_lines import alternative_lines, entries
    from nightjar.report.folder import write_all
    from nightjar.results.bench import RoundRun, write_meta, write_tables
    from nightjar.results.run_set import ResultSet

    runs = outcome.runs
    recorded: list[RoundRun] = []
    alts = []
    for r in sorted({x.slot.round for x in runs}):
        these = [x for x in runs if x.slot.round == r]
        result_set = ResultSet.build([x.result for x in these], title=f"round {r}",
                                     oracle_policy=None, gamma_max=args.gamma_max, slo=slo)
        write_all(result_set, out / f"round-{r}", force=True, report=False)
        alts += entries(result_set, group=r)
        for x, policy_run in zip(these, result_set.runs, strict=True):
            recorded.append(RoundRun(x.slot.round, x.slot.position, x.slot.label, x.result,
                                     x.load.to_json(), x.attempts, x.loaded, x.wall_s,
                                     list(x.earlier_loads), policy_run.slug))
    write_tables(out, recorded, slo)
    write_meta(out, {
        "format": "nightjar-bench/1",
        "command": shlex.join(["nightjar", *sys.argv[1:]]) if sys.argv else "",
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        "trace": trace.name, "requests": len(trace),
        "policies": list(plan.policies), "labels": list(plan.labels),
        "repeats": plan.repeats, "noise_policy": plan.noise_policy,
        "cores": list(cores), "cpu_binding": binding.to_json(),
        "max_foreign_pct": args.max_foreign, "retries": args.retries,
        "gamma_max": args.gamma_max, "draft_kv": args.draft_kv, "seed": args.seed,
        "max_num_batched_tokens": LIVE_MAX_NUM_BATCHED_TOKENS,
        "time_scale": args.time_scale, "max_num_seqs": args.max_num_seqs,
        "max_model_len": args.max_model_len, "kv_cache_gb": args.kv_cache_gb,
        "profile": args.profile, "engine_starts": outcome.engine_starts,
    }, recorded)
    from nightjar.report.bench import bench_tables

    for table in bench_tables(recorded, slo):
        Console().print(table)
    for line in alternative_lines(alts):
        Console().print(line, highlight=False)
    console.print(f"wrote {out}/ (runs.csv, policies.csv, pairs.csv, bench.json; vLLM's log: "
                  f"{Path(log_file.name).name})")
    return 0
