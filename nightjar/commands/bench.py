"""``nightjar bench live``: policies on the real engine, in interleaved rounds, with intervals.

Each round runs every policy once (one of them twice: the noise floor), in an order
rotated by one place per round, on engines started once for the whole benchmark and
pinned to a set of cores; the machine's foreign load is sampled during every run and a
run others disturbed is run again. Per policy: means with 95% intervals; per pair:
the paired per-round difference, and "A beats B" only where its interval excludes 0.
Several ``--trace`` share the engines and the rounds (each round runs every trace, the
traces' order rotated as well), so that each trace is measured in the same machine
states as the others; each trace's benchmark is written to ``OUT/bench-<trace name>/``.
vLLM is imported only when the command runs.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from nightjar.commands.run_flags import add_option_flags, options_of
from nightjar.commands.slo_args import make_slo
from nightjar.core.defaults import DEFAULT_MAX_NUM_BATCHED_TOKENS
from nightjar.errors import NightjarInputError
from nightjar.live.bench.bench_options import BenchOptions


def add_parser(sub: Any) -> None:
    top = sub.add_parser("bench", help="benchmark policies on the live engine (repeated, "
                         "interleaved, with intervals)", description=__doc__)
    kinds = top.add_subparsers(dest="bench_kind", required=True, parser_class=type(top))
    p = kinds.add_parser("live", help="the live benchmark (vLLM)", description=__doc__)
    add_option_flags(p, BenchOptions)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from nightjar.live.bench.limits import BENCH_POLICIES, bench_gamma_max
    from nightjar.live.bench.rotation import BenchPlan
    from nightjar.live.binding import allowed_cores
    from nightjar.live.models import check_pair, default_draft, resolve_model, vocab_size
    from nightjar.live.policy_check import check_policies
    from nightjar.live.step_prior import checked_prior
    from nightjar.live.trace_fit import check_token_ids, first_requests
    from nightjar.live.version import check_vllm_version
    from nightjar.results.write import prepare_out_dir
    from nightjar.trace.trace import load_trace

    options = options_of(args, BenchOptions)
    slo = make_slo(options.slo_ttft, options.slo_tpot)
    options.check()
    plan = BenchPlan.asked(None if options.policies is None else list(options.policies),
                           options.repeats, options.noise_policy, BENCH_POLICIES,
                           len(options.traces))
    # --time-scale multiplies the trace's times: the trace itself is scaled, as
    # `nightjar live` scales it by --rate-scale, so every run replays the same times.
    traces = [load_trace(t).rate_scaled(1.0 / options.time_scale) for t in options.traces]
    if options.max_requests is not None:
        traces = [first_requests(t, options.max_requests) for t in traces]
    _check_names(traces)
    cores = allowed_cores(options.cores)
    profile = checked_prior(options.profile)
    gamma_max = bench_gamma_max(options.gamma_max, profile)
    check_vllm_version()
    check_policies(plan.policies, gamma_max)
    target = resolve_model(options.model, "model")
    draft_arg = options.draft or default_draft(options.model)
    draft = resolve_model(draft_arg, "draft") if draft_arg else None
    # Synthetic prompt ids come from the target's vocabulary (with a draft, the pair's).
    vocab = check_pair(target, draft) if draft else (vocab_size(target) or 32000)
    for trace, given in zip(traces, options.traces, strict=True):
        check_token_ids(trace, vocab, given)
    out = options.out or _default_out([t.name for t in traces])
    prepare_out_dir(out, options.force)
    outs = [out]
    if len(traces) > 1:
        outs = [_trace_out(out, t.name) for t in traces]
        for folder in outs:
            prepare_out_dir(folder, options.force)
    return _bench(options, gamma_max, plan, cores, traces, target, draft, vocab, profile, outs,
                  out, slo)


def _check_names(traces: list[Any]) -> None:
    from nightjar.results.outdir import safe_name

    names = [safe_name(t.name) for t in traces]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise NightjarInputError(
            f"--trace given twice with the name {twice[0]!r}: each trace's results go to "
            "bench-<trace name>/, so the traces' names must differ")


def _trace_out(out: Path, name: str) -> Path:
    from nightjar.results.outdir import safe_name

    return out / f"bench-{safe_name(name)}"


def _default_out(names: list[str]) -> Path:
    from nightjar.results.outdir import default_out_dir

    return default_out_dir(f"bench-{'-'.join(names)}")


def _bench(options: BenchOptions, gamma_max: int, plan: Any, cores: tuple[int, ...],
           traces: list[Any], target: str, draft: str | None, vocab: int, profile: str | None,
           outs: list[Path], out: Path, slo: Any) -> int:
    from rich.console import Console

    from nightjar.live import logs
    from nightjar.live.settings import LiveSettings

    console = Console(stderr=True)
    settings = LiveSettings(gamma_max=gamma_max, seed=options.seed, draft_kv=options.draft_kv,
                            profile=profile)
    expected = [_expected_run_s(t, options.max_num_seqs, gamma_max, profile) for t in traces]
    runs_each = plan.runs // len(traces)
    total = sum(runs_each * (s + 4) for s, _ in expected) + 120
    each = "; ".join(f"{t.name}: {len(t)} requests, {s:.0f} s a run"
                     for t, (s, _) in zip(traces, expected, strict=True))
    console.print(
        f"nightjar bench: {plan.runs} runs ({plan.repeats} rounds x {len(plan.labels)}: "
        f"{', '.join(plan.labels)}"
        f"{f' x {len(traces)} traces' if len(traces) > 1 else ''}); {each}; expected about "
        f"{_minutes(total)} ({expected[0][1]}; plus engine starts and warm-up)"
    )
    with logs.configured(out / "vllm.log", options.verbose) as log_file:
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
        outcome = _measure(options, plan, cores, traces, target, draft, vocab, settings, out,
                           console)
    for k, (trace, folder) in enumerate(zip(traces, outs, strict=True)):
        runs = [r for r in outcome.runs if r.slot.trace == k]
        others = [t.name for t in traces if t is not trace]
        _report(options, gamma_max, plan, runs, outcome.engine_starts, folder, slo, binding,
                cores, trace, others, started, console)
    console.print(f"wrote {out}/ (runs.csv, policies.csv, pairs.csv, bench.json"
                  f"{' in each bench-<trace>/' if len(traces) > 1 else ''}; vLLM's log: "
                  f"{Path(log_file.name).name})")
    if len(traces) > 1:
        from nightjar.results.outdir import mark_finished

        mark_finished(out)
    return 0


def _expected_run_s(trace: Any, max_num_seqs: int, gamma_max: int, profile: str | None
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
        cfg = SimConfig(gamma_max=min(gamma_max, prof.gamma_max), max_num_seqs=max_num_seqs,
                        max_num_batched_tokens=DEFAULT_MAX_NUM_BATCHED_TOKENS)
        run = simulate(trace, prof, "nospec", cfg)
    except NightjarInputError:  # a step table, or a trace the profile cannot serve
        return fallback
    return max(run.duration_s, span) + 3.0, "nospec simulated on --profile"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def _measure(options: BenchOptions, plan: Any, cores: tuple[int, ...], traces: list[Any],
             target: str, draft: str | None, vocab: int, settings: Any, out: Path,
             console: Any) -> Any:
    from nightjar.live.bench.runner import BenchSetup, engine_specs, run_bench
    from nightjar.live.engine_spec import EngineSpec
    from nightjar.live.replay import ReplayOptions
    from nightjar.report.progress import LazyProgress

    base = EngineSpec(
        target=target, draft=draft, settings=settings, max_model_len=options.max_model_len,
        max_num_seqs=options.max_num_seqs, kv_cache_bytes=int(options.kv_cache_gb * 2**30),
        spec_tokens=settings.gamma_max, load_progress=options.verbose,
        max_num_batched_tokens=DEFAULT_MAX_NUM_BATCHED_TOKENS,
    )
    with_draft, plain = engine_specs(base, plan)
    setup = BenchSetup(
        traces=tuple(traces), draft_engine=with_draft, plain_engine=plain,
        options=ReplayOptions(vocab, options.seed), cores=cores,
        workdir=out / ".steps", max_foreign_pct=options.max_foreign, retries=options.retries,
        warmup=not options.no_warmup,
    )
    with LazyProgress(enabled=not options.quiet, show_after_s=0.0) as bar:

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
                bar.print(f"{_run_name(r.slot, plan, traces)}: "
                          f"{r.wall_s:.0f} s; {r.load.summary}{mark}")

        def progress(slot: Any, done: int) -> None:
            label = _run_name(slot, plan, traces)
            if label not in bar:
                bar.add(label, float(len(traces[slot.trace])))
            bar.update(label, float(done))

        return run_bench(setup, plan, report, None if options.quiet else progress)


def _run_name(slot: Any, plan: Any, traces: list[Any]) -> str:
    where = f" {traces[slot.trace].name}" if len(traces) > 1 else ""
    return f"round {slot.round}/{plan.repeats}{where} {slot.label}"


def _report(options: BenchOptions, gamma_max: int, plan: Any, runs: list[Any],
            engine_starts: int, out: Path, slo: Any, binding: Any, cores: tuple[int, ...],
            trace: Any, others: list[str], started: float, console: Any) -> None:
    """Write one trace's benchmark folder and print its tables."""
    from rich.console import Console

    from nightjar.report.alt_lines import alternative_lines, entries
    from nightjar.report.folder import write_all
    from nightjar.results.bench import RoundRun, write_meta, write_tables
    from nightjar.results.outdir import mark_finished
    from nightjar.results.run_set import ResultSet

    recorded: list[RoundRun] = []
    alts = []
    for r in sorted({x.slot.round for x in runs}):
        these = [x for x in runs if x.slot.round == r]
        result_set = ResultSet.build([x.result for x in these], title=f"round {r}",
                                     oracle_policy=None, gamma_max=gamma_max, slo=slo)
        write_all(result_set, out / f"round-{r}", force=True, report=False)
        alts += entries(result_set, group=r)
        for x, policy_run in zip(these, result_set.runs, strict=True):
            recorded.append(RoundRun(x.slot.round, x.slot.position, x.slot.label, x.result,
                                     x.load.to_json(), x.attempts, x.loaded, x.wall_s,
                                     list(x.earlier_loads), policy_run.slug, x.started_s))
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
        "max_foreign_pct": options.max_foreign, "retries": options.retries,
        "gamma_max": gamma_max, "draft_kv": options.draft_kv, "seed": options.seed,
        "max_num_batched_tokens": DEFAULT_MAX_NUM_BATCHED_TOKENS,
        "time_scale": options.time_scale, "max_num_seqs": options.max_num_seqs,
        "max_model_len": options.max_model_len, "kv_cache_gb": options.kv_cache_gb,
        "profile": options.profile, "engine_starts": engine_starts,
        # The traces whose runs shared these rounds and engines, in each round's blocks.
        "interleaved_with": others,
    }, recorded)
    from nightjar.report.bench import bench_tables

    if others:
        console.print(f"[bold]{trace.name}[/] ({out})")
    for table in bench_tables(recorded, slo):
        Console().print(table)
    for line in alternative_lines(alts):
        Console().print(line, highlight=False)
    mark_finished(out)
