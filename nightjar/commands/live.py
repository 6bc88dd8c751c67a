"""``nightjar live``: run policies inside vLLM V1 over a trace, or serve with Nightjar.

vLLM is imported only when the command runs, so ``nightjar --help`` works without it.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.slo_args import add_slo_args, slo_from_args

DEFAULT_POLICIES = ("nospec", "fixed:3", "nightjar")
# Policies whose decisions vLLM cannot carry out, with the reason.
UNSUPPORTED = {
    "tetris": "tetris allocates a different gamma per request, which vLLM cannot run "
    "(one speculative length per step for the whole batch)",
    "oracle": "oracle needs the true latency table and acceptance rates, which only the "
    "simulator knows",
}


# (flag, type, help) for nightjar.memory.MemoryConfig fields (flag name = field name).
MEMORY_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("--low-water-blocks", int, "offload when free KV blocks stay below this"),
    ("--k-offload", int, "consecutive low steps before an offload"),
    ("--k-reload", int, "consecutive roomy steps before a reload"),
    ("--reload-hold-s", float, "the room for the draft must last this long (s)"),
    ("--min-dwell-s", float, "least stay resident/offloaded after a move (s)"),
    ("--regret-window-s", float, "an offload this soon after a reload is a regret (s)"),
    ("--max-dwell-s", float, "cap on the offloaded dwell that regrets double (s)"),
)


def memory_settings(args: argparse.Namespace) -> dict[str, Any] | None:
    """The MemoryConfig fields for ``LiveSettings.memory``; validated here (exit 2)."""
    from nightjar.memory import MemoryConfig

    given = {
        flag[2:].replace("-", "_"): getattr(args, flag[2:].replace("-", "_"))
        for flag, _, _ in MEMORY_FLAGS
    }
    given = {k: v for k, v in given.items() if v is not None}
    if args.no_reload_on_gain:
        given["reload_on_gain"] = False
    if args.offload != "on":
        if given:
            first = "--" + next(iter(given)).replace("_", "-")
            raise NightjarInputError(f"{first} sets the memory controller: add --offload on")
        return None
    MemoryConfig(**given)  # raises a one-line NightjarInputError on a bad value
    return given


def add_parser(sub: Any) -> None:
    p = sub.add_parser("live", help="run policies inside vLLM (or serve)", description=__doc__)
    p.add_argument(
        "--model",
        required=True,
        help="preset (vicuna-13b, deepseek-r1-distill-qwen-7b, llama-3.1-8b), "
        "local directory or cached Hugging Face id",
    )
    p.add_argument("--draft", default=None, help="draft model (default: the preset's)")
    p.add_argument("--trace", default=None, help="bundled trace name or path")
    p.add_argument(
        "--policy",
        action="append",
        dest="policies",
        metavar="SPEC",
        help=f"policy spec, repeatable; default: {' '.join(DEFAULT_POLICIES)}",
    )
    p.add_argument("--gamma-max", type=int, default=3)
    p.add_argument(
        "--spec-tokens",
        type=int,
        default=None,
        help="the engine's num_speculative_tokens (default: --gamma-max)",
    )
    p.add_argument(
        "--draft-kv",
        choices=["sync", "skip"],
        default="sync",
        help="at gamma 0, keep the draft's KV in sync (vLLM) or skip the draft",
    )
    p.add_argument(
        "--offload",
        choices=["on", "off"],
        default="off",
        help="move the draft out of device memory under KV pressure",
    )
    mem = p.add_argument_group(
        "memory controller (with --offload on; defaults and reasons in docs/memory.md)"
    )
    for flag, kind, doc in MEMORY_FLAGS:
        mem.add_argument(flag, type=kind, default=None, help=doc)
    mem.add_argument(
        "--no-reload-on-gain",
        action="store_true",
        help="reload only when KV room lasts, never early for forgone speculation gain",
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
        help="step-time prior for nightjar+/dsd: a profile (bundled name or JSON) or a "
        "step table measured by an earlier live run (DIR/<policy>/step_table.json)",
    )
    p.add_argument(
        "--ballast-blocks",
        type=int,
        default=None,
        help="KV blocks the draft stands for (default: its weight bytes)",
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply trace times by this (0.1 replays ten times faster)",
    )
    p.add_argument("--max-requests", type=int, default=None, help="replay the first N only")
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--kv-cache-gb", type=float, default=None, help="KV pool size (GiB)")
    p.add_argument(
        "--compile",
        action="store_true",
        help="let vLLM torch.compile the model (slow warm-up on CPU)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="output folder (default: reports/<run>)")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report")
    p.add_argument(
        "--serve",
        action="store_true",
        help="run vLLM's OpenAI server with Nightjar instead of a trace",
    )
    add_slo_args(p)
    p.add_argument("--format", choices=["csv", "parquet"], default="csv",
                   help="tables as CSV (default) or parquet (needs pyarrow)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument(
        "vllm_args",
        nargs=argparse.REMAINDER,
        help="after --, extra flags passed to vLLM's server (--serve)",
    )
    p.set_defaults(func=run)


def _check_policies(specs: list[str], gamma_max: int) -> None:
    import nightjar.live.cycle  # noqa: F401  (registers the diagnostic cycle policy)
    from nightjar.policy import PolicyEnv, make_policy

    for spec in specs:
        name = spec.partition(":")[0]
        if name in UNSUPPORTED:
            raise NightjarInputError(f"policy {spec!r} cannot run on vLLM: {UNSUPPORTED[name]}")
        make_policy(spec, PolicyEnv(gamma_max=gamma_max, per_request=False))


def _check_profile(name: str | None) -> str | None:
    """Load the step-time prior once here so that a bad one fails before vLLM starts."""
    if name is None:
        return None
    from nightjar.live.latency import load_latency

    load_latency(name)
    # The engine core may run elsewhere: give it an absolute path for files.
    path = Path(name)
    return str(path.resolve()) if path.is_file() else name


def run(args: argparse.Namespace) -> int:
    from nightjar.live.models import check_pair, default_draft, resolve_model
    from nightjar.live.settings import LiveSettings
    from nightjar.live.version import check_vllm_version
    from nightjar.output import require_format
    from nightjar.policy import expand_specs

    slo_from_args(args)  # a bad SLO or format fails before vLLM starts
    require_format(args.format)
    check_vllm_version()
    spec_tokens = args.gamma_max if args.spec_tokens is None else args.spec_tokens
    if args.gamma_max < 0 or spec_tokens < 0:
        raise NightjarInputError("--gamma-max and --spec-tokens must be >= 0")
    if args.gamma_max > spec_tokens:
        raise NightjarInputError(
            f"--gamma-max {args.gamma_max} exceeds the engine's num_speculative_tokens "
            f"({spec_tokens}); vLLM cannot draft more tokens than it was started with"
        )
    if not args.time_scale > 0:
        raise NightjarInputError(f"--time-scale must be > 0, got {args.time_scale}")
    # Flag checks before the model checks: they need nothing on disk.
    memory = memory_settings(args)
    profile = _check_profile(args.profile)
    if args.ballast_blocks is not None and args.ballast_blocks < 0:
        raise NightjarInputError(f"--ballast-blocks must be >= 0, got {args.ballast_blocks}")
    target = resolve_model(args.model, "model")
    draft_arg = args.draft or default_draft(args.model)
    draft = resolve_model(draft_arg, "draft") if draft_arg else None
    vocab = check_pair(target, draft) if draft else 32000
    default = ["nightjar"] if args.serve else list(DEFAULT_POLICIES)
    specs = expand_specs(args.policies or default)
    _check_policies(specs, args.gamma_max)
    if draft is None and any(s != "nospec" for s in specs):
        raise NightjarInputError("policies other than nospec need a draft model (--draft)")
    base = LiveSettings(
        gamma_max=args.gamma_max,
        seed=args.seed,
        draft_kv=args.draft_kv,
        memory=memory,
        ballast_blocks=args.ballast_blocks,
        reload=args.reload,
        profile=profile,
    )
    if args.serve:
        from nightjar.live.serve import serve

        return int(serve(args, target, draft, base, spec_tokens, specs))
    if args.trace is None:
        raise NightjarInputError("give --trace FILE to replay, or --serve")
    return _replay_all(args, target, draft, vocab, base, spec_tokens, specs)


def _replay_all(
    args: argparse.Namespace,
    target: str,
    draft: str | None,
    vocab: int,
    base: Any,
    spec_tokens: int,
    specs: list[str],
) -> int:
    import dataclasses

    from rich.console import Console

    from nightjar.metrics import summarize
    from nightjar.output import prepare_out_dir, write_all
    from nightjar.table import summary_table
    from nightjar.trace import load_trace

    trace = load_trace(args.trace)
    if args.max_requests is not None:
        trace = _head(trace, args.max_requests)
    out = args.out or Path("reports") / f"live-{trace.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    prepare_out_dir(out, args.force)

    from nightjar.live.engine import EngineSpec, prepare_env

    prepare_env()
    from nightjar.live.replay import ReplayOptions, replay

    console = Console(stderr=True)
    results: list[Any] = []
    for spec in specs:
        step_log = out / f".steps-{len(results)}.jsonl"
        step_log.unlink(missing_ok=True)  # the scheduler appends
        settings = dataclasses.replace(base, policy=spec, step_log=str(step_log))
        engine = EngineSpec.from_args(args, target, draft, settings, spec_tokens)
        console.print(f"[bold]{spec}[/]: replaying {len(trace)} requests")
        result, _ = replay(trace, engine, ReplayOptions(args.time_scale, vocab, args.seed))
        result.policy = spec
        results.append(result)
    title = f"live: {trace.name} on {Path(target).name} ({len(trace)} requests)"
    summaries = [summarize(r, slo_from_args(args)) for r in results]
    Console().print(summary_table(summaries, None, title=title))
    write_all(results, out, force=True, summaries=summaries, fmt=args.format,
              report_title=None if args.no_report else title)
    _write_step_tables(results, out)
    console.print(f"wrote {out}/")
    return 0


def _write_step_tables(results: list[Any], out: Path) -> None:
    """Each run's measured step times, reusable as ``--profile`` (where it has enough steps)."""
    import json

    from nightjar.live.latency import StepTable
    from nightjar.output import unique_slugs

    for slug, result in zip(unique_slugs(results), results, strict=True):
        try:
            table = StepTable.from_steps(result.steps)
        except NightjarInputError:
            continue  # e.g. a run that never changed gamma has no per-gamma table
        (out / slug / "step_table.json").write_text(json.dumps(table.to_json(), indent=1))


def _head(trace: Any, n: int) -> Any:
    import dataclasses

    if n < 1:
        raise NightjarInputError(f"--max-requests must be >= 1, got {n}")
    cut = slice(0, min(n, len(trace)))
    return dataclasses.replace(
        trace,
        arrival_s=trace.arrival_s[cut],
        prompt_tokens=trace.prompt_tokens[cut],
        output_tokens=trace.output_tokens[cut],
        workload=trace.workload[cut],
        acceptance=trace.acceptance[cut],
        prompts=trace.prompts[cut] if trace.prompts is not None else None,
        span_s=None,
    )
