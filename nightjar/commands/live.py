"""``nightjar live``: run policies inside vLLM V1 over a trace, or serve with Nightjar.

Nightjar's own flags are below; every other flag is one of vLLM's engine flags, as
vLLM spells them (``--gpu-memory-utilization 0.5``, ``--enable-prefix-caching``; with
--serve also its server flags), parsed by vLLM's own parser when the command runs.
The drafter is vLLM's --speculative-config (draft_model, eagle, eagle3, mtp, ngram,
suffix). vLLM is imported only when the command runs, so --help works without it.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from nightjar.commands.run_flags import add_option_flags, options_of
from nightjar.commands.slo_args import make_slo
from nightjar.errors import NightjarInputError
from nightjar.live.run_options import LiveOptions

if TYPE_CHECKING:
    from nightjar.core.memory import MemoryConfig
    from nightjar.core.records import RunResult
    from nightjar.core.slo import Slo
    from nightjar.live.preflight import CheckedRun
    from nightjar.profile.profile import Profile


def add_parser(sub: Any) -> None:
    # No abbreviations: every flag Nightjar does not own is vLLM's, and an
    # abbreviation of one of Nightjar's would take it.
    p = sub.add_parser("live", help="run policies inside vLLM (or serve)", description=__doc__,
                       allow_abbrev=False)
    add_option_flags(p, LiveOptions)
    p.add_argument_group(
        "vLLM's flags",
        "any other vLLM engine flag as vLLM spells it (vllm serve --help), checked by "
        "vLLM's parser when the command runs: --gpu-memory-utilization, --dtype, "
        "--enable-prefix-caching, ...; with --serve also its server flags (after -- too). "
        "Refused: a setting given twice (--kv-cache-gb and --kv-cache-memory-bytes), "
        "--scheduler-cls/--worker-cls, pipeline or data parallelism",
    )
    # Filled by nightjar.cli: the flags this parser does not know, and those after --.
    p.set_defaults(func=run, vllm_flags=[], server_args=[])


def live_options(args: argparse.Namespace) -> LiveOptions:
    """The typed options of parsed ``nightjar live`` flags."""
    return options_of(args, LiveOptions)


def memory_settings(args: argparse.Namespace) -> MemoryConfig | None:
    """``LiveSettings.memory`` from parsed flags (:meth:`LiveOptions.memory`)."""
    return live_options(args).memory()


def run(args: argparse.Namespace) -> int:
    from nightjar.live.preflight import preflight
    from nightjar.results.write import require_format
    from nightjar.roofline.prior_file import roofline_prior

    options = live_options(args)
    slo = make_slo(options.slo_ttft, options.slo_tpot)  # a bad SLO or format fails first
    require_format(options.format)
    checked = preflight(options, roofline_prior)
    if options.serve:
        if options.profile_out is not None:
            raise NightjarInputError("--profile-out needs a trace's run, not --serve")
        return _serve(options, checked)
    if options.trace is None:
        raise NightjarInputError("give --trace FILE to replay, or --serve")
    fit = _fit_target(options, checked) if options.profile_out is not None else None
    return _replay_all(options, checked, slo, getattr(args, "invocation", ""), fit)


class _FitTarget(NamedTuple):
    """Where ``--profile-out`` writes, checked before the run, and the base it corrects."""

    real: Path
    shown: Path
    base: Profile
    base_arg: str


def _fit_target(options: LiveOptions, checked: CheckedRun) -> _FitTarget:
    from nightjar.fidelity.fit_file import fit_base
    from nightjar.results.outdir import check_out_file

    assert options.profile_out is not None
    base = fit_base(checked.base.profile, "--profile-out")
    inputs = [p for p in (checked.base.profile, options.trace) if p is not None]
    real = check_out_file(options.profile_out, options.force, inputs=inputs,
                          what="--profile-out")
    return _FitTarget(real, Path(options.profile_out), base, str(checked.base.profile))


def _serve(options: LiveOptions, checked: CheckedRun) -> int:
    if len(checked.specs) != 1:
        raise NightjarInputError("--serve runs one policy; give exactly one --policy")
    from nightjar.live.serve import serve

    settings = dataclasses.replace(checked.base, policy=checked.specs[0])
    spec, flags = checked.engine.served(settings, options.vllm_flags, options.server_args)
    return int(serve(spec, options.host, options.port, flags))


def _replay_all(options: LiveOptions, checked: CheckedRun, slo: Slo, command: str,
                fit: _FitTarget | None = None) -> int:
    from rich.console import Console

    from nightjar.live import logs
    from nightjar.live.run_files import read_engine_facts, step_log_path
    from nightjar.live.trace_fit import check_token_ids, first_requests
    from nightjar.results.outdir import default_out_dir, mark_finished
    from nightjar.results.write import prepare_out_dir
    from nightjar.trace.trace import load_trace

    engine, specs = checked.engine, checked.specs
    trace = load_trace(str(options.trace))
    if options.request_rate is not None:  # the rate scale it stands for is recorded
        checked = dataclasses.replace(checked,
                                      rate_scale=trace.scale_for_rate(options.request_rate))
    trace = trace.rate_scaled(checked.rate_scale)
    if options.burstiness is not None:  # as nightjar sim draws them (run.prepare.arrivals)
        trace = trace.gamma_arrivals(options.burstiness, options.seed)
    if options.max_requests is not None:
        trace = first_requests(trace, options.max_requests)
    check_token_ids(trace, engine.vocab, str(options.trace))
    out = options.out or default_out_dir(f"live-{trace.name}")
    prepare_out_dir(out, options.force, replace=options.force)
    with logs.configured(out / "vllm.log", options.verbose) as log_file:
        from nightjar.live.engine_spec import prepare_env

        prepare_env()
        from nightjar.live.replay import ReplayOptions, replay
        from nightjar.report.progress import LazyProgress

        results: list[RunResult] = []
        facts: list[dict[str, Any]] = []
        with LazyProgress(enabled=not options.quiet, show_after_s=0.0) as bar:
            for i, spec in enumerate(specs):
                step_log = step_log_path(out, i)
                settings = dataclasses.replace(checked.base, policy=spec, step_log=str(step_log))
                label = f"{i + 1}/{len(specs)} {spec}"
                bar.add(label, float(len(trace)))
                started = time.monotonic()
                result, _ = replay(trace, engine.spec(settings),
                                   ReplayOptions(engine.vocab, options.seed),
                                   progress=functools.partial(_advance, bar, label))
                facts.append(read_engine_facts(step_log))
                bar.print(
                    f"[bold]{spec}[/]: {len(trace)} requests in {time.monotonic() - started:.0f} s"
                )
                result.policy = spec
                results.append(result)
    record = _provenance(options, checked, trace, command)
    for result in results:
        result.provenance = dict(record)
    _report(options, checked, slo, trace.name, len(trace), results, facts, out)
    mark_finished(out)
    Console(stderr=True).print(f"wrote {out}/ (vLLM's log: {log_file.name})")
    if fit is not None:
        from nightjar.fidelity.fit_file import write_fitted

        command = shlex.join(["nightjar", "profile", "--from-run", str(out), "--base",
                              fit.base_arg, "--out", str(fit.shown)])
        for line in write_fitted(results, fit.base, fit.real, fit.shown, name=None,
                                 sources=[str(out)], command=command):
            print(line, file=sys.stderr if line.startswith("warning:") else sys.stdout)
    return 0


def _report(options: LiveOptions, checked: CheckedRun, slo: Slo, name: str, requests: int,
            results: list[RunResult], facts: list[dict[str, Any]], out: Path) -> None:
    from nightjar.core.drafter import offload_refusal
    from nightjar.live.run_files import write_engine_facts, write_step_table
    from nightjar.report.live_summary import report_live_runs

    engine = checked.engine
    title = f"live: {name} on {Path(engine.target).name} ({requests} requests)"
    result_set = report_live_runs(
        results, title, out, gamma_max=engine.gamma_max, slo=slo,
        offload=checked.base.memory is not None, movable=offload_refusal(engine.method) is None,
        report=not options.no_report, report_cdn=options.report_cdn, fmt=options.format,
    )
    for run, engine_facts in zip(result_set.runs, facts, strict=True):
        write_step_table(out / run.slug, run.result.steps)
        # The engine's settings as vLLM resolved them (the scheduler read them back).
        write_engine_facts(out / run.slug, engine_facts)


def _provenance(options: LiveOptions, checked: CheckedRun, trace: Any,
                command: str) -> dict[str, Any]:
    """What the live run was, in the simulator's column names where it shares them."""
    import vllm

    from nightjar.results.provenance import of_live_run

    engine, base = checked.engine, checked.base
    sizes = engine.sizes
    return of_live_run({
        "rate_scale": checked.rate_scale, "burstiness": options.burstiness,
        "offload": "on" if base.memory is not None else "off",
        "reload": base.reload, "draft_kv": base.draft_kv, "gamma_max": engine.gamma_max,
        "max_num_seqs": sizes.max_num_seqs, "max_num_batched_tokens": sizes.max_num_batched_tokens,
        "max_model_len": sizes.max_model_len, "model": engine.target, "drafter": engine.method,
        "draft": engine.draft, "tensor_parallel_size": options.tensor_parallel_size,
        "vllm_version": str(vllm.__version__),
    }, trace, command)


def _advance(bar: Any, label: str, done: int) -> None:
    bar.update(label, float(done))
