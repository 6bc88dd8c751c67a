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
from nightjar.run.config import (
    LIVE_GAMMA_MAX,
    LIVE_MAX_MODEL_LEN,
    LIVE_MAX_NUM_BATCHED_TOKENS,
    LIVE_MAX_NUM_SEQS,
    LIVE_POLICIES,
)

# Policies whose decisions vLLM cannot carry out, with the reason.
UNSUPPORTED = {
    "tetris": "tetris allocates a different gamma per request, which vLLM cannot run "
    "(one speculative length per step for the whole batch)",
    "oracle": "oracle needs the true latency table and acceptance rates, which only the "
    "simulator knows",
}


# (flag, type, help) for nightjar.core.memory.MemoryConfig fields (flag name = field name).
MEMORY_FLAGS: tuple[tuple[str, type, str], ...] = (
    ("--low-water-blocks", int, "offload when free KV blocks stay below this"),
    ("--k-offload", int, "consecutive low steps before an offload"),
    ("--k-reload", int, "consecutive roomy steps before a reload"),
    ("--reload-hold-s", float, "the room for the draft must last this long (s)"),
    ("--min-dwell-s", float, "least stay resident/offloaded after a move (s)"),
    ("--regret-window-s", float, "an offload this soon after a reload is a regret (s)"),
    ("--max-dwell-s", float, "cap on the offloaded dwell that regrets double (s)"),
)


def memory_settings(args: argparse.Namespace) -> Any:
    """``LiveSettings.memory``: a MemoryConfig, or None where elastic memory is off
    (exit 2 on a bad value or a threshold given without it).

    ``--offload auto`` (the default) is on only with ``--alias-draft``: there the
    draft's weights live inside its KV ballast, so the bytes an offload frees become
    KV blocks for real. Without aliasing the live engine can only emulate them by
    withholding a ballast from the pool while the draft is resident, which costs
    capacity that a server without Nightjar would have (vLLM already keeps the draft's
    weights outside the pool): ``auto`` stays off there, and ``--offload on`` is the
    emulation, asked for by name. Whether the drafter has weights to move is checked
    once it is resolved (:func:`_check_memory_flags`)."""
    from nightjar.core.memory import MemoryConfig

    given = {
        flag[2:].replace("-", "_"): getattr(args, flag[2:].replace("-", "_"))
        for flag, _, _ in MEMORY_FLAGS
    }
    given = {k: v for k, v in given.items() if v is not None}
    if args.no_reload_on_gain:
        given["reload_on_gain"] = False
    if getattr(args, "no_offload_on_capacity", False):
        given["offload_on_capacity"] = False
    if args.offload == "off" or (args.offload == "auto" and not args.alias_draft):
        if getattr(args, "reload", "drain") == "migrate":
            raise NightjarInputError(
                "--reload migrate needs --offload on (no draft reload without it)"
            )
        if given:
            first = "--" + next(iter(given)).replace("_", "-")
            raise NightjarInputError(f"{first} sets the memory controller: add --offload on")
        return None
    return MemoryConfig(**given)  # raises a one-line NightjarInputError on a bad value


def _json_object(text: str) -> dict[str, Any]:
    import json

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
    for flag, kind, doc in MEMORY_FLAGS:
        mem.add_argument(flag, type=kind, default=None, help=doc)
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


def _check_policies(specs: list[str], gamma_max: int) -> None:
    import nightjar.live.cycle  # noqa: F401  (registers the diagnostic cycle policy)
    from nightjar.core.policy import PolicyEnv
    from nightjar.policies.registry import make_policy

    for spec in specs:
        name = spec.partition(":")[0]
        if name in UNSUPPORTED:
            raise NightjarInputError(f"policy {spec!r} cannot run on vLLM: {UNSUPPORTED[name]}")
        if "@" in spec:
            # A live engine's memory setting is the engine's (--offload), one per run.
            raise NightjarInputError(f"policy {spec!r}: run variants (@offload=...) are the "
                                     "simulator's; give --offload instead")
        make_policy(spec, PolicyEnv(gamma_max=gamma_max, per_request=False))


def roofline_prior(gpu: str, target: str, draft: str | None, method: str = "draft_model"
                   ) -> str:
    """``--profile roofline:GPU``: the roofline profile of this pair on a catalogue GPU,
    written to a temporary file (the engine core loads its prior by path). A drafter
    other than a draft model is derived from the target (``nightjar.roofline.drafters``).
    A model the roofline cannot read (no ``config.json``, an unsupported architecture)
    is a one-line error."""
    import json
    import tempfile

    from nightjar.roofline.costs import build_profile
    from nightjar.roofline.hardware import get_gpu
    from nightjar.roofline.model_config import load_model_config

    own_model = method == "draft_model"
    if own_model and draft is None:
        raise NightjarInputError("--profile roofline:GPU needs a draft model (--draft)")
    data = build_profile(
        get_gpu(gpu), load_model_config(target),
        load_model_config(draft) if own_model and draft is not None else None,
        command=f"nightjar live --profile roofline:{gpu}", drafter=method,
    )
    fd, path = tempfile.mkstemp(prefix="nightjar-roofline-", suffix=".json")
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return path


def _check_profile(name: str | None) -> str | None:
    """Load the step-time prior once here so that a bad one fails before vLLM starts."""
    if name is None:
        return None
    from nightjar.live.profiling.latency import load_latency

    load_latency(name)
    # The engine core may run elsewhere: give it an absolute path for files.
    path = Path(name)
    return str(path.resolve()) if path.is_file() else name


def within_prior(given: int | None, gamma_max: int, profile: str | None) -> int:
    """``gamma_max`` held to the gammas the ``--profile`` prices: past its table a
    lookup returns the top gamma's time, so longer speculation would look free to a
    policy planning with it. A default is lowered; a ``--gamma-max`` given is refused."""
    from nightjar.core.defaults import gamma_max_within
    from nightjar.live.profiling.latency import priced_gamma_max

    top = None if profile is None else priced_gamma_max(profile)
    if given is not None and top is not None and gamma_max > top:
        raise NightjarInputError(
            f"--gamma-max {given} exceeds the --profile's table (gamma <= {top}): "
            f"pass --gamma-max {top}, or profile with --gammas 0..{given}")
    return gamma_max_within(gamma_max, given is not None, top)


def _reload_cost(args: argparse.Namespace, profile: str | None, memory: Any) -> float | None:
    """Seconds a reload costs, for the early reload on forgone gain; None turns it off."""
    if args.reload_cost_s is not None:
        if memory is None:
            raise NightjarInputError("--reload-cost-s sets the memory controller: add --offload on")
        if not args.reload_cost_s >= 0.0:
            raise NightjarInputError(f"--reload-cost-s must be >= 0, got {args.reload_cost_s}")
        return float(args.reload_cost_s)
    if memory is None or profile is None:
        return None
    from nightjar.live.profiling.latency import load_latency, reload_cost_estimate

    cost: float | None = reload_cost_estimate(load_latency(profile)[0])
    return cost


def _forced_residency(spec: str | None) -> tuple[dict[int, str], dict[int, str]]:
    """``"40:offload,t800:reload"`` -> ({40: "offload"}, {800: "reload"}) (test hook):
    engine steps, or milliseconds after the first step when prefixed with ``t``."""
    by_step: dict[int, str] = {}
    by_ms: dict[int, str] = {}
    for item in (spec or "").split(","):
        if not item.strip():
            continue
        key, _, action = item.strip().partition(":")
        try:
            if key.startswith("t"):
                by_ms[int(key[1:])] = action.strip()
            else:
                by_step[int(key)] = action.strip()
        except ValueError:
            raise NightjarInputError(
                f"--forced-residency wants [t]N:offload|reload,..., got {item!r}"
            ) from None
    return by_step, by_ms


def _check_kv_room(args: argparse.Namespace, draft: str | None, memory: Any) -> None:
    """Refuse, before vLLM starts, a KV pool the draft's ballast would fill entirely.

    With ``--offload on`` the resident draft withholds as many KV blocks as its weight
    bytes (docs/live.md); when those bytes reach the whole ``--kv-cache-gb`` no block is
    left for requests. Exact block counts need vLLM's block size, so a pool that is
    only nearly full is still caught by the scheduler at start-up (one line, exit 2).
    """
    if args.kv_cache_gb is not None and not args.kv_cache_gb > 0:
        raise NightjarInputError(f"--kv-cache-gb must be > 0, got {args.kv_cache_gb}")
    if draft is None or memory is None or args.kv_cache_gb is None:
        return
    if args.ballast_blocks is not None:
        return  # counted in blocks: the scheduler checks it against the pool
    from nightjar.live.residency.coordinator import draft_weight_bytes

    # Per rank: --kv-cache-gb is one rank's pool, and each rank holds 1/TP of the draft.
    draft_bytes = draft_weight_bytes(draft) / args.tensor_parallel_size
    pool_bytes = args.kv_cache_gb * 2**30
    if draft_bytes >= pool_bytes:
        raise NightjarInputError(
            f"the draft's {draft_bytes / 2**20:.1f} MiB of weights, withheld from the KV "
            f"pool while it is resident (--offload on), fill the whole pool of "
            f"{pool_bytes / 2**20:.1f} MiB (--kv-cache-gb {args.kv_cache_gb}): give a larger "
            "--kv-cache-gb or --offload off"
        )


@dataclasses.dataclass(frozen=True)
class _Engine:
    """What the flags ask of the engine, checked: the drafter and vLLM's own flags."""

    target: str
    method: str
    draft: str | None  # the drafter's checkpoint (a draft model, an EAGLE head)
    options: dict[str, Any]
    gamma_max: int
    spec_tokens: int
    vocab: int
    engine_args: dict[str, Any]  # vLLM flags as AsyncEngineArgs keywords (replay)


def _engine_spec(args: argparse.Namespace, engine: _Engine, settings: Any) -> Any:
    """The engine the flags describe; a policy that never speculates (``nospec``,
    see ``spec_needs_draft``) runs without a drafter."""
    from nightjar.live.engine_spec import EngineSpec
    from nightjar.policies.registry import spec_needs_draft

    speculate = spec_needs_draft(settings.policy)
    return EngineSpec(
        target=engine.target,
        draft=engine.draft if speculate else None,
        settings=settings,
        max_model_len=args.max_model_len,
        max_num_seqs=args.max_num_seqs,
        max_num_batched_tokens=args.max_num_batched_tokens,
        kv_cache_bytes=int(args.kv_cache_gb * 2**30) if args.kv_cache_gb else None,
        enforce_eager=not args.compile,
        spec_tokens=engine.spec_tokens,
        load_progress=args.verbose,
        tensor_parallel_size=args.tensor_parallel_size,
        method=engine.method,
        spec_options=engine.options,
        speculate=speculate,
        # --serve passes the user's vLLM flags to vLLM's server as given.
        engine_args={} if args.serve else engine.engine_args,
    )


def _check_numbers(args: argparse.Namespace) -> None:
    for flag in ("max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        value = getattr(args, flag)
        if value < 1:
            raise NightjarInputError(f"--{flag.replace('_', '-')} must be >= 1, got {value}")
    args.rate_scale = rate_scale_of(args)  # also reads the deprecated --time-scale
    if args.tensor_parallel_size < 1:
        raise NightjarInputError(
            f"--tensor-parallel-size must be >= 1, got {args.tensor_parallel_size}"
        )
    if args.ballast_blocks is not None and args.ballast_blocks < 0:
        raise NightjarInputError(f"--ballast-blocks must be >= 0, got {args.ballast_blocks}")


def _lengths(args: argparse.Namespace, spec_tokens: int | None) -> tuple[int, int]:
    """(gamma_max, the engine's num_speculative_tokens): each defaults to the other."""
    gamma_max = args.gamma_max
    if gamma_max is None:
        gamma_max = spec_tokens if spec_tokens is not None else LIVE_GAMMA_MAX
    k = gamma_max if spec_tokens is None else spec_tokens
    if gamma_max < 0 or k < 0:
        raise NightjarInputError("--gamma-max and num_speculative_tokens must be >= 0")
    if gamma_max > k:
        raise NightjarInputError(
            f"--gamma-max {gamma_max} exceeds the engine's num_speculative_tokens "
            f"({k}); vLLM cannot draft more tokens than it was started with"
        )
    return gamma_max, k


def _drafter(args: argparse.Namespace, target: str) -> tuple[str, str | None, Any]:
    """(method, resolved checkpoint or None, the choice), checked against the target."""
    from nightjar.core.drafter import DRAFT_MODEL, drafter_kind
    from nightjar.live.drafters import check_fit, check_method, detect_method
    from nightjar.live.models import default_draft, resolve_model

    choice = _choice(args)
    model = choice.model
    method = choice.method
    if model is None and method == DRAFT_MODEL and not choice.explicit:
        model = default_draft(args.model)  # the preset's pair
    draft = resolve_model(model, "draft") if model else None
    if draft is not None and choice.method == DRAFT_MODEL and not _method_given(args):
        method = detect_method(draft)  # vLLM detects an EAGLE head the same way
    check_method(method)
    # No drafter named and none found: a nospec-only run needs none;
    # _check_drafter_present refuses the policies that would speculate.
    named = choice.explicit and drafter_kind(method).needs_model
    if named or draft is not None or method == "mtp":
        check_fit(method, target, draft)
    return method, draft, choice


def _choice(args: argparse.Namespace) -> Any:
    from nightjar.live.drafters import choose_drafter

    return choose_drafter(
        args.speculative_config, args.spec_method, args.spec_model, args.spec_tokens, args.draft
    )


def _method_given(args: argparse.Namespace) -> bool:
    return args.spec_method is not None or "method" in (args.speculative_config or {})


def _vllm_settings(args: argparse.Namespace) -> dict[str, Any]:
    """vLLM's own flags, parsed and checked by vLLM's parser (one line on a problem)."""
    from nightjar.live.vllm_args import check_settings, engine_args, given_settings

    given = given_settings(list(args.vllm_flags), serve=args.serve)
    check_settings(given, {"--kv-cache-gb": args.kv_cache_gb is not None,
                           "--compile": args.compile})
    if not args.serve and args.server_args:
        raise NightjarInputError(
            "flags after -- go to vLLM's server and need --serve; give engine flags "
            "before --"
        )
    if args.serve:
        given_settings(list(args.vllm_flags) + list(args.server_args), serve=True)
    return engine_args(given)


def _check_memory_flags(args: argparse.Namespace, method: str, memory: Any) -> None:
    from nightjar.core.drafter import offload_refusal

    why = offload_refusal(method)
    if why is None:
        return
    if args.offload == "auto" and not args.forced_residency:
        # Nothing to move: auto means off here, and the flags that need a draft say so.
        if args.alias_draft or args.ballast_blocks is not None:
            flag = "--alias-draft" if args.alias_draft else "--ballast-blocks"
            raise NightjarInputError(f"{flag}: {why}")
        return
    if memory is not None or args.forced_residency:
        raise NightjarInputError(f"--offload on: {why}")
    if args.alias_draft or args.ballast_blocks is not None:
        flag = "--alias-draft" if args.alias_draft else "--ballast-blocks"
        raise NightjarInputError(f"{flag}: {why}")


def run(args: argparse.Namespace) -> int:
    from nightjar.live.models import resolve_model, vocab_size
    from nightjar.live.settings import LiveSettings
    from nightjar.live.version import check_vllm_version
    from nightjar.policies.registry import expand_specs

    slo_from_args(args)  # a bad SLO or format fails before vLLM starts
    from nightjar.results.write import require_format

    require_format(args.format)
    _check_numbers(args)
    choice = _choice(args)
    gamma_max, spec_tokens = _lengths(args, choice.spec_tokens)
    # Flag checks before the model checks: they need nothing on disk.
    memory = memory_settings(args)
    roofline = args.profile is not None and args.profile.startswith("roofline:")
    profile = None if roofline else _check_profile(args.profile)
    reload_cost = _reload_cost(args, profile, memory)
    if args.alias_draft and memory is None and not args.forced_residency:
        # Without the memory controller no ballast is withheld: the KV pool would
        # hand out the very blocks that hold the draft's weights.
        raise NightjarInputError("--alias-draft needs --offload on or auto (the ballast holds"
                                 " the draft)")
    if choice.method in DRAFTERS:
        # Named on the command line: refused without vLLM or a model on disk.
        _check_memory_flags(args, choice.method, memory)
    check_vllm_version()
    engine_args = _vllm_settings(args)
    target = resolve_model(args.model, "model")
    method, draft, choice = _drafter(args, target)
    _check_memory_flags(args, method, memory)
    # Synthetic prompt ids come from the target's vocabulary (a drafter's own was
    # checked against it by _drafter).
    vocab = vocab_size(target) or 32000
    if roofline:
        # Needs the models' config.json, so it is built once they are resolved.
        gpu = args.profile.partition(":")[2]
        profile = _check_profile(roofline_prior(gpu, target, draft, method))
        reload_cost = _reload_cost(args, profile, memory)
    capped = within_prior(args.gamma_max, gamma_max, profile)
    if capped < gamma_max and choice.spec_tokens is None:
        spec_tokens = capped  # nothing asked for a longer draft than the policy may use
    gamma_max = capped
    default = ["nightjar"] if args.serve else list(LIVE_POLICIES)
    specs = expand_specs(args.policies or default)
    _check_policies(specs, gamma_max)
    engine = _Engine(target, method, draft, dict(choice.options), gamma_max, spec_tokens,
                     vocab, engine_args)
    _check_drafter_present(engine, specs)
    _check_kv_room(args, draft if any(s != "nospec" for s in specs) else None, memory)
    forced = _forced_residency(args.forced_residency)
    base = LiveSettings(
        gamma_max=gamma_max,
        seed=args.seed,
        draft_kv=args.draft_kv,
        memory=memory,
        reload_cost_s=reload_cost,
        ballast_blocks=args.ballast_blocks,
        reload=args.reload,
        alias=args.alias_draft,
        profile=profile,
        forced_residency=forced[0],
        forced_residency_ms=forced[1],
    )
    if args.serve:
        if len(specs) != 1:
            raise NightjarInputError("--serve runs one policy; give exactly one --policy")
        from nightjar.live.serve import serve
        from nightjar.live.vllm_args import take_flag

        settings = dataclasses.replace(base, policy=specs[0])
        flags = list(args.vllm_flags) + [a for a in args.server_args if a != "--"]
        spec = _engine_spec(args, engine, settings)
        if "additional_config" in engine.engine_args:
            # The server would take the user's object instead of Nightjar's: merge them
            # (engine_kwargs does) and pass the merged one.
            flags = take_flag(flags, "--additional-config")
            extra_config = {"additional_config": engine.engine_args["additional_config"]}
            spec = dataclasses.replace(spec, engine_args=extra_config)
        return int(serve(spec, args.host, args.port, flags))
    if args.trace is None:
        raise NightjarInputError("give --trace FILE to replay, or --serve")
    return _replay_all(args, engine, base, specs)


def _check_drafter_present(engine: _Engine, specs: list[str]) -> None:
    from nightjar.core.drafter import drafter_kind
    from nightjar.policies.registry import spec_needs_draft

    if engine.draft is None and drafter_kind(engine.method).needs_model and any(
        spec_needs_draft(s) for s in specs
    ):
        raise NightjarInputError("policies other than nospec need a draft model (--draft)")


def _replay_all(args: argparse.Namespace, engine: _Engine, base: Any, specs: list[str]) -> int:
    from rich.console import Console

    from nightjar.core.drafter import offload_refusal
    from nightjar.live import logs
    from nightjar.report.alt_lines import alternative_lines, entries
    from nightjar.report.folder import write_all
    from nightjar.report.progress import LazyProgress
    from nightjar.report.terminal import summary_table
    from nightjar.results.outdir import default_out_dir
    from nightjar.results.run_set import ResultSet
    from nightjar.results.write import prepare_out_dir
    from nightjar.trace.trace import load_trace

    trace = load_trace(args.trace).rate_scaled(args.rate_scale)
    if args.max_requests is not None:
        trace = _head(trace, args.max_requests)
    ids = [max(p) for p in (trace.prompts or []) if isinstance(p, list) and p]
    if ids and max(ids) >= engine.vocab:
        raise NightjarInputError(
            f"--trace {args.trace}: a prompt holds token id {max(ids)}, beyond the target's "
            f"vocabulary ({engine.vocab} tokens)")
    out = args.out or default_out_dir(f"live-{trace.name}")
    prepare_out_dir(out, args.force, replace=args.force)
    with logs.configured(out / "vllm.log", args.verbose) as log_file:
        from nightjar.live.engine_spec import prepare_env

        prepare_env()
        from nightjar.live.replay import ReplayOptions, replay

        console = Console(stderr=True)
        results: list[Any] = []
        facts: list[dict[str, Any]] = []
        with LazyProgress(enabled=not args.quiet, show_after_s=0.0) as bar:
            for i, spec in enumerate(specs):
                step_log = out / f".steps-{i}.jsonl"
                step_log.unlink(missing_ok=True)  # the scheduler appends
                settings = dataclasses.replace(base, policy=spec, step_log=str(step_log))
                label = f"{i + 1}/{len(specs)} {spec}"
                bar.add(label, float(len(trace)))
                started = time.monotonic()
                result, _ = replay(
                    trace,
                    _engine_spec(args, engine, settings),
                    ReplayOptions(engine.vocab, args.seed),
                    progress=functools.partial(_advance, bar, label),
                )
                facts.append(_engine_facts(step_log))
                bar.print(
                    f"[bold]{spec}[/]: {len(trace)} requests in {time.monotonic() - started:.0f} s"
                )
                result.policy = spec
                results.append(result)
    title = f"live: {trace.name} on {Path(engine.target).name} ({len(trace)} requests)"
    # No oracle and no bound on vLLM (the engine knows no true table): the yardstick
    # is the best static run (nospec, fixed:G) among those replayed.
    result_set = ResultSet.build(
        results, title=title, oracle_policy=None, gamma_max=engine.gamma_max,
        slo=slo_from_args(args), offload=base.memory is not None,
        movable=offload_refusal(engine.method) is None,
    )
    Console().print(summary_table(result_set.summaries, result_set.yardsticks, title=title))
    for line in alternative_lines(entries(result_set), result_set.missing):
        Console().print(line, highlight=False)
    for line in off_grid_lines(results):
        console.print(line)
    write_all(
        result_set, out, force=True, report=not args.no_report, report_cdn=args.report_cdn,
        fmt=args.format,
    )
    _write_step_tables(result_set, out)
    for run, engine_facts in zip(result_set.runs, facts, strict=True):
        # The engine's settings as vLLM resolved them (the scheduler read them back).
        (out / run.slug / "engine.json").write_text(json.dumps(engine_facts, indent=1))
    console.print(f"wrote {out}/ (vLLM's log: {log_file.name})")
    return 0


def _engine_facts(step_log: Path) -> dict[str, Any]:
    from nightjar.live.steplog import read_log

    start = next((e for e in read_log(step_log).events if e.get("event") == "start"), {})
    engine: dict[str, Any] = dict(start.get("engine") or {})
    return engine


def rate_scale_of(args: argparse.Namespace) -> float:
    """``--rate-scale`` (one meaning on every command: it multiplies the request rate),
    or the deprecated ``--time-scale T`` as its inverse 1/T."""
    import math
    import warnings

    if args.time_scale is not None:
        if args.rate_scale is not None:
            raise NightjarInputError("give --rate-scale or --time-scale (deprecated), not both")
        if not (math.isfinite(args.time_scale) and args.time_scale > 0):
            raise NightjarInputError(f"--time-scale must be > 0, got {args.time_scale}")
        warnings.warn("--time-scale T is deprecated: use --rate-scale 1/T", FutureWarning,
                      stacklevel=1)
        return 1.0 / float(args.time_scale)
    scale = 1.0 if args.rate_scale is None else float(args.rate_scale)
    if not (math.isfinite(scale) and scale > 0):
        raise NightjarInputError(f"--rate-scale must be a finite number > 0, got {scale}")
    return scale


def _advance(bar: Any, label: str, done: int) -> None:
    bar.update(label, float(done))


def _write_step_tables(result_set: Any, out: Path) -> None:
    """Each run's measured step times, reusable as ``--profile`` (where it has enough steps)."""
    import json

    from nightjar.live.profiling.latency import StepTable

    for run in result_set.runs:
        try:
            table = StepTable.from_steps(run.result.steps)
        except NightjarInputError:
            continue  # e.g. a run that never changed gamma has no per-gamma table
        (out / run.slug / "step_table.json").write_text(json.dumps(table.to_json(), indent=1))


def off_grid_lines(results: list[Any]) -> list[str]:
    """One line per live run whose policy looked the profile up off its grid (the
    summary's ``off_grid_lookups``, from ``Clamped``): those were priced at the edge, or
    past the largest batch along the table's last segment."""
    lines = []
    for r in results:
        lookups = int(r.extra.get("off_grid_lookups", 0.0))
        if lookups:
            steps = int(r.extra.get("off_grid_steps", 0.0))
            lines.append(
                f"{r.policy}: {lookups} profile lookups in {steps} steps lay outside the "
                "profile's table and were priced off its grid (off_grid_lookups)"
            )
    return lines


def _head(trace: Any, n: int) -> Any:
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
        speculate=trace.speculate[cut] if trace.speculate is not None else None,
    )
