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
import json
import time
from pathlib import Path
from typing import Any

from nightjar.commands.slo_args import add_slo_args, slo_from_args
from nightjar.core.defaults import DEFAULT_OFFLOAD, OFFLOAD_MODES
from nightjar.core.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.core.drafter import DRAFTERS
from nightjar.errors import NightjarInputError
from nightjar.live.elastic import THRESHOLD_FIELDS, flag_of
from nightjar.run.config import (
    LIVE_GAMMA_MAX,
    LIVE_MAX_MODEL_LEN,
    LIVE_MAX_NUM_BATCHED_TOKENS,
    LIVE_MAX_NUM_SEQS,
    LIVE_POLICIES,
)


def memory_settings(args: argparse.Namespace) -> Any:
    """``LiveSettings.memory`` from the flags (:func:`nightjar.live.elastic.memory_config`)."""
    from nightjar.live.elastic import THRESHOLDS, memory_config

    return memory_config(
        args.offload, args.alias_draft, args.reload,
        {name: getattr(args, name) for name in THRESHOLDS},
        reload_on_gain=not args.no_reload_on_gain,
        offload_on_capacity=not args.no_offload_on_capacity,
    )


def _json_object(text: str) -> dict[str, Any]:

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


def add_parser(sub: Any) -> None:
    # No abbreviations: every flag Nightjar does not own is vLLM's, and an
    # abbreviation of one of Nightjar's would take it.
    p = sub.add_parser("live", help="run policies inside vLLM (or serve)", description=__doc__,
                       allow_abbrev=False)
    p.add_argument(
        "--model",
        required=True,
        help="preset (vicuna-13b, deepseek-r1-distill-qwen-7b, llama-3.1-8b), "
        "local directory or cached Hugging Face id",
    )
    spec = p.add_argument_group(
        "the drafter (vLLM's speculative config; one spelling per setting)"
    )
    spec.add_argument(
        "--speculative-config", "-sc", type=_json_object, default=None, metavar="JSON",
        help="vLLM's speculative config: method (draft_model, eagle, eagle3, mtp, ngram, "
        "suffix), model, num_speculative_tokens and the method's own keys "
        "(prompt_lookup_max, ...); default: the preset's draft model",
    )
    spec.add_argument("--spec-method", default=None, help="vLLM's shorthand for its method")
    spec.add_argument("--spec-model", default=None, help="vLLM's shorthand for its model")
    spec.add_argument("--draft", default=None,
                      help="draft model (= --spec-model; default: the preset's)")
    p.add_argument("--trace", default=None, help="bundled trace name or path")
    p.add_argument(
        "--policy",
        action="append",
        dest="policies",
        metavar="SPEC",
        help=f"policy spec, repeatable; default: {' '.join(LIVE_POLICIES)}",
    )
    p.add_argument(
        "--gamma-max", type=int, default=None,
        help=f"longest speculation a policy may choose (default: num_speculative_tokens "
        f"when given, else {LIVE_GAMMA_MAX})",
    )
    spec.add_argument(
        "--spec-tokens",
        type=int,
        default=None,
        help="the engine's num_speculative_tokens, as vLLM's flag (default: --gamma-max)",
    )
    p.add_argument(
        "--draft-kv",
        choices=DRAFT_KV_MODES,
        default=DEFAULT_DRAFT_KV,
        help="at gamma 0, keep the draft's KV in sync (vLLM's behaviour) or skip the draft",
    )
    p.add_argument(
        "--offload",
        choices=OFFLOAD_MODES,
        default=DEFAULT_OFFLOAD,
        help="elastic draft memory: move the draft out of device memory when its KV blocks"
        " are worth more to waiting requests; auto = on with --alias-draft for a drafter"
        " with weights (the freed bytes become KV blocks), off otherwise; on = the"
        " emulation (a ballast withheld while the draft is resident)",
    )
    mem = p.add_argument_group(
        "memory controller (with --offload on; defaults and reasons in docs/memory.md)"
    )
    for name, kind, doc in THRESHOLD_FIELDS:
        mem.add_argument(flag_of(name), type=kind, default=None, help=doc)
    mem.add_argument(
        "--no-reload-on-gain",
        action="store_true",
        help="reload only when KV room lasts, never early for forgone speculation gain",
    )
    mem.add_argument(
        "--no-offload-on-capacity",
        action="store_true",
        help="offload only after the policy chose gamma 0 (not when the draft's blocks "
        "are worth more to waiting requests than speculation buys)",
    )
    mem.add_argument(
        "--reload-cost-s",
        type=float,
        default=None,
        help="seconds a reload costs, weighed against the forgone gain (default: estimated "
        "from --profile when it is a nightjar profile; without either that reload is off)",
    )
    p.add_argument(
        "--reload",
        choices=["drain", "migrate"],
        default="drain",
        help="how a reload empties the draft's KV region: wait for its blocks to free "
        "(drain) or copy them out at once (migrate)",
    )
    p.add_argument(
        "--profile",
        default=None,
        help="step-time prior for nightjar+/dsd: a profile (bundled name or JSON), a "
        "step table measured by an earlier live run (DIR/<policy>/step_table.json), or "
        "roofline:GPU (the roofline of this target and draft on a catalogue GPU, "
        "nightjar profile --list); without one nightjar+ learns from a neutral shape",
    )
    p.add_argument(
        "--alias-draft",
        action="store_true",
        help="keep the draft's weights inside the withheld KV blocks (real reclaim; on CPU "
        "the draft's linears run slower, docs/kernels.md); needs --offload on; the ballast "
        "is sized from the draft's tensor shapes",
    )
    p.add_argument(
        "--ballast-blocks",
        type=int,
        default=None,
        help="KV blocks the draft stands for (default: its weight bytes)",
    )
    p.add_argument(
        "--rate-scale",
        type=float,
        default=None,
        metavar="S",
        help="multiply the trace's request rate by S: arrival times divided by S (10 replays"
        " ten times faster; default 1), as nightjar sim and sweep",
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=None,
        help="deprecated: multiply arrival times by T, the same as --rate-scale 1/T",
    )
    p.add_argument("--max-requests", type=int, default=None, help="replay the first N only")
    p.add_argument("--max-model-len", type=int, default=LIVE_MAX_MODEL_LEN,
                   help="vLLM max_model_len (tokens)")
    p.add_argument("--max-num-seqs", type=int, default=LIVE_MAX_NUM_SEQS,
                   help="vLLM max_num_seqs (batch cap), as in nightjar sim")
    p.add_argument("--max-num-batched-tokens", type=int, default=LIVE_MAX_NUM_BATCHED_TOKENS,
                   help="vLLM max_num_batched_tokens (step token budget), as in nightjar sim")
    p.add_argument(
        "--kv-cache-gb", type=float, default=None, help="KV pool size per rank (GiB)"
    )
    p.add_argument(
        "--tensor-parallel-size", "-tp",
        type=int,
        default=1,
        help="ranks to shard target and draft over (vLLM's TP); on CPU each rank gets its "
        "own cores unless VLLM_CPU_OMP_THREADS_BIND is set",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="let vLLM torch.compile the model (slow warm-up on CPU)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the policy, vLLM and prompts")
    p.add_argument("--out", type=Path, default=None, help="output folder (default: reports/<run>)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show vLLM's whole log (by default warnings only; the full log is in "
        "OUT/vllm.log either way)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--report-cdn",
        action="store_true",
        help="load plotly.js from its CDN in the report (small file, needs network)",
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="run vLLM's OpenAI server with Nightjar instead of a trace",
    )
    add_slo_args(p)
    p.add_argument("--format", choices=["csv", "parquet"], default="csv",
                   help="tables as CSV (default) or parquet (needs pyarrow)")
    p.add_argument("--host", default="127.0.0.1", help="--serve: address to listen on")
    p.add_argument("--port", type=int, default=8000, help="--serve: port to listen on")
    # Test hook, hidden from --help: forced residency moves at given engine steps
    # ("40:offload,80:reload") or milliseconds after the first step ("t500:offload"),
    # so load tests get offload/reload cycles on demand.
    p.add_argument("--forced-residency", default=None, help=argparse.SUPPRESS)
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


def _check_numbers(args: argparse.Namespace) -> None:
    for flag in ("max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        value = getattr(args, flag)
        if value < 1:
            raise NightjarInputError(f"--{flag.replace('_', '-')} must be >= 1, got {value}")
    from nightjar.live.rate_scale import rate_scale_of

    args.rate_scale = rate_scale_of(args.rate_scale, args.time_scale)
    if args.tensor_parallel_size < 1:
        raise NightjarInputError(
            f"--tensor-parallel-size must be >= 1, got {args.tensor_parallel_size}"
        )
    if args.ballast_blocks is not None and args.ballast_blocks < 0:
        raise NightjarInputError(f"--ballast-blocks must be >= 0, got {args.ballast_blocks}")


def run(args: argparse.Namespace) -> int:
    from nightjar.live import elastic
    from nightjar.live.drafter_setup import method_given, resolve_drafter
    from nightjar.live.drafters import choose_drafter
    from nightjar.live.engine_choice import EngineChoice, EngineSizes
    from nightjar.live.forced_residency import parse_forced_residency
    from nightjar.live.kv_room import check_kv_room
    from nightjar.live.lengths import speculation_lengths
    from nightjar.live.models import resolve_model, vocab_size
    from nightjar.live.policy_check import check_drafter_present, check_policies, speculating
    from nightjar.live.settings import LiveSettings
    from nightjar.live.step_prior import checked_prior, within_prior
    from nightjar.live.version import check_vllm_version
    from nightjar.live.vllm_args import checked_engine_args
    from nightjar.policies.registry import expand_specs
    from nightjar.results.write import require_format
    from nightjar.roofline.prior_file import is_roofline_prior, roofline_prior

    slo_from_args(args)  # a bad SLO or format fails before vLLM starts
    require_format(args.format)
    _check_numbers(args)
    choice = choose_drafter(args.speculative_config, args.spec_method, args.spec_model,
                            args.spec_tokens, args.draft)
    gamma_max, spec_tokens = speculation_lengths(args.gamma_max, choice.spec_tokens)
    # Flag checks before the model checks: they need nothing on disk.
    memory = memory_settings(args)
    forced = bool(args.forced_residency)
    roofline = is_roofline_prior(args.profile)
    profile = None if roofline else checked_prior(args.profile)
    reload_cost = elastic.reload_cost(args.reload_cost_s, profile, memory)
    elastic.check_alias(args.alias_draft, memory, forced)
    ballast_given = args.ballast_blocks is not None
    if choice.method in DRAFTERS:
        # Named on the command line: refused without vLLM or a model on disk.
        elastic.check_offload(choice.method, args.offload, memory, forced, args.alias_draft,
                              ballast_given)
    check_vllm_version()
    engine_args = checked_engine_args(args.vllm_flags, args.server_args, args.serve,
                                      args.kv_cache_gb is not None, args.compile)
    target = resolve_model(args.model, "model")
    method, draft = resolve_drafter(
        choice, args.model, target, method_given(args.speculative_config, args.spec_method))
    elastic.check_offload(method, args.offload, memory, forced, args.alias_draft, ballast_given)
    # Synthetic prompt ids come from the target's vocabulary (a drafter's own was
    # checked against it by resolve_drafter).
    vocab = vocab_size(target) or 32000
    if roofline:
        # Needs the models' config.json, so it is built once they are resolved.
        gpu = args.profile.partition(":")[2]
        profile = checked_prior(roofline_prior(gpu, target, draft, method))
        reload_cost = elastic.reload_cost(args.reload_cost_s, profile, memory)
    capped = within_prior(args.gamma_max, gamma_max, profile)
    if capped < gamma_max and choice.spec_tokens is None:
        spec_tokens = capped  # nothing asked for a longer draft than the policy may use
    gamma_max = capped
    default = ["nightjar"] if args.serve else list(LIVE_POLICIES)
    specs = expand_specs(args.policies or default)
    check_policies(specs, gamma_max)
    sizes = EngineSizes(args.max_model_len, args.max_num_seqs, args.max_num_batched_tokens,
                        args.kv_cache_gb, args.compile, args.verbose, args.tensor_parallel_size)
    engine = EngineChoice(target, method, draft, dict(choice.options), gamma_max, spec_tokens,
                          vocab, engine_args, sizes)
    check_drafter_present(engine.draft, engine.method, specs)
    check_kv_room(args.kv_cache_gb, draft if speculating(specs) else None, memory,
                  args.ballast_blocks, args.tensor_parallel_size)
    by_step, by_ms = parse_forced_residency(args.forced_residency)
    base = LiveSettings(
        gamma_max=gamma_max, seed=args.seed, draft_kv=args.draft_kv, memory=memory,
        reload_cost_s=reload_cost, ballast_blocks=args.ballast_blocks, reload=args.reload,
        alias=args.alias_draft, profile=profile, forced_residency=by_step,
        forced_residency_ms=by_ms,
    )
    if args.serve:
        return _serve(args, engine, base, specs)
    if args.trace is None:
        raise NightjarInputError("give --trace FILE to replay, or --serve")
    return _replay_all(args, engine, base, specs)


def _serve(args: argparse.Namespace, engine: Any, base: Any, specs: list[str]) -> int:
    if len(specs) != 1:
        raise NightjarInputError("--serve runs one policy; give exactly one --policy")
    from nightjar.live.serve import serve

    spec, flags = engine.served(dataclasses.replace(base, policy=specs[0]), args.vllm_flags,
                                args.server_args)
    return int(serve(spec, args.host, args.port, flags))


def _replay_all(args: argparse.Namespace, engine: Any, base: Any, specs: list[str]) -> int:
    from rich.console import Console

    from nightjar.live import logs
    from nightjar.live.run_files import read_engine_facts, step_log_path
    from nightjar.live.trace_fit import check_token_ids, first_requests
    from nightjar.results.outdir import default_out_dir
    from nightjar.results.write import prepare_out_dir
    from nightjar.trace.trace import load_trace

    trace = load_trace(args.trace).rate_scaled(args.rate_scale)
    if args.max_requests is not None:
        trace = first_requests(trace, args.max_requests)
    check_token_ids(trace, engine.vocab, args.trace)
    out = args.out or default_out_dir(f"live-{trace.name}")
    prepare_out_dir(out, args.force, replace=args.force)
    with logs.configured(out / "vllm.log", args.verbose) as log_file:
        from nightjar.live.engine_spec import prepare_env

        prepare_env()
        from nightjar.live.replay import ReplayOptions, replay
        from nightjar.report.progress import LazyProgress

        results: list[Any] = []
        facts: list[dict[str, Any]] = []
        with LazyProgress(enabled=not args.quiet, show_after_s=0.0) as bar:
            for i, spec in enumerate(specs):
                step_log = step_log_path(out, i)
                settings = dataclasses.replace(base, policy=spec, step_log=str(step_log))
                label = f"{i + 1}/{len(specs)} {spec}"
                bar.add(label, float(len(trace)))
                started = time.monotonic()
                result, _ = replay(trace, engine.spec(settings),
                                   ReplayOptions(engine.vocab, args.seed),
                                   progress=functools.partial(_advance, bar, label))
                facts.append(read_engine_facts(step_log))
                bar.print(
                    f"[bold]{spec}[/]: {len(trace)} requests in {time.monotonic() - started:.0f} s"
                )
                result.policy = spec
                results.append(result)
    _report(args, engine, base, trace, results, facts, out)
    Console(stderr=True).print(f"wrote {out}/ (vLLM's log: {log_file.name})")
    return 0


def _report(args: argparse.Namespace, engine: Any, base: Any, trace: Any, results: list[Any],
            facts: list[dict[str, Any]], out: Path) -> None:
    from nightjar.core.drafter import offload_refusal
    from nightjar.live.run_files import write_engine_facts, write_step_table
    from nightjar.report.live_summary import report_live_runs

    title = f"live: {trace.name} on {Path(engine.target).name} ({len(trace)} requests)"
    result_set = report_live_runs(
        results, title, out, gamma_max=engine.gamma_max, slo=slo_from_args(args),
        offload=base.memory is not None, movable=offload_refusal(engine.method) is None,
        report=not args.no_report, report_cdn=args.report_cdn, fmt=args.format,
    )
    for run, engine_facts in zip(result_set.runs, facts, strict=True):
        write_step_table(out / run.slug, run.result.steps)
        # The engine's settings as vLLM resolved them (the scheduler read them back).
        write_engine_facts(out / run.slug, engine_facts)


def _advance(bar: Any, label: str, done: int) -> None:
    bar.update(label, float(done))
