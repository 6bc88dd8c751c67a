"""What the user asks of a live run (``nightjar live``), as one typed value: each field
is one flag, and its metadata (:func:`option`) says how the command line spells it,
its help, choices and group, so the flags are made from the fields
(``nightjar.commands.run_flags.add_option_flags``) as ``nightjar sim``'s are made from
``RunConfig``'s. The flags the live benchmark shares are made by the same functions
(:mod:`nightjar.live.bench.bench_options`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

from nightjar.core.defaults import (
    DEFAULT_GAMMA_MAX,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_OFFLOAD,
    LIVE_POLICIES,
    OFFLOAD_MODES,
)
from nightjar.core.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.core.memory import MemoryConfig
from nightjar.core.slo import Slo

DRAFTER_GROUP = "the drafter (vLLM's speculative config; one spelling per setting)"
MEMORY_GROUP = "memory controller (with --offload on; defaults and reasons in docs/memory.md)"


def option(flag: str | None, help: str | None = None, *, default: Any = MISSING,
           aliases: Sequence[str] = (), metavar: str | None = None,
           choices: Sequence[str] | None = None, group: str | None = None,
           action: str | None = None, parse: Callable[[str], Any] | None = None,
           hidden: bool = False) -> Any:
    """A field that is one flag: ``flag`` (None: set by the command line's parser, no
    flag of its own), its ``help`` (``hidden``: left out of ``--help``), ``aliases``,
    ``metavar``, ``choices``, the argument ``group`` it is listed under, an argparse
    ``action`` (``store_true``, ``append``) and a ``parse`` function other than the
    field's type. A field without a default is a required flag."""
    metadata = {"flag": flag, "help": help, "aliases": tuple(aliases), "metavar": metavar,
                "choices": choices, "group": group, "action": action, "parse": parse,
                "hidden": hidden}
    if default is MISSING:
        return field(metadata=metadata)
    return field(default=default, metadata=metadata)


def json_object(text: str) -> dict[str, Any]:
    """A flag's JSON object (``--speculative-config``); argparse reports a bad one."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object")
    return value


# Flags the live run and the live benchmark share, defined once.

def model_option(help: str) -> Any:
    return option("--model", help)


def draft_option(help: str, group: str | None = None) -> Any:
    return option("--draft", help, default=None, group=group)


def trace_option(required: bool = False) -> Any:
    return option("--trace", "bundled trace name or path", default=MISSING if required else None)


def policies_option(default: Sequence[str]) -> Any:
    return option("--policy", f"policy spec, repeatable; default: {' '.join(default)}",
                  default=None, metavar="SPEC", action="append")


def seed_option(whose: str) -> Any:
    return option("--seed", f"seed of the {whose}, vLLM and prompts", default=0)


def max_requests_option() -> Any:
    return option("--max-requests", "replay the first N only", default=None)


def out_option() -> Any:
    return option("--out", "output folder (default: reports/<run>)", default=None)


def force_option() -> Any:
    return option("--force", "write into a non-empty --out folder", default=False,
                  action="store_true")


def quiet_option() -> Any:
    return option("--quiet", "no progress bar", default=False, action="store_true")


def slo_ttft_option() -> Any:
    default = Slo().ttft_s
    return option("--slo-ttft", "time-to-first-token limit for goodput, seconds "
                  f"(default {default:g})", default=default, metavar="S")


def slo_tpot_option() -> Any:
    default = Slo().tpot_s
    return option("--slo-tpot", "time-per-output-token limit for goodput, seconds "
                  f"(default {default:g})", default=default, metavar="S")


@dataclass(frozen=True, kw_only=True)
class LiveOptions:
    """``nightjar live``'s flags, in the order ``--help`` lists them."""

    model: str = model_option(
        "preset (vicuna-13b, deepseek-r1-distill-qwen-7b, llama-3.1-8b), local directory or "
        "cached Hugging Face id")
    speculative_config: dict[str, Any] | None = option(
        "--speculative-config", "vLLM's speculative config: method (draft_model, eagle, "
        "eagle3, mtp, ngram, suffix), model, num_speculative_tokens and the method's own keys"
        " (prompt_lookup_max, ...); default: the preset's draft model", default=None,
        aliases=("-sc",), metavar="JSON", group=DRAFTER_GROUP, parse=json_object)
    spec_method: str | None = option("--spec-method", "vLLM's shorthand for its method",
                                     default=None, group=DRAFTER_GROUP)
    spec_model: str | None = option("--spec-model", "vLLM's shorthand for its model",
                                    default=None, group=DRAFTER_GROUP)
    draft: str | None = draft_option("draft model (= --spec-model; default: the preset's)",
                                     DRAFTER_GROUP)
    trace: str | None = trace_option()
    policies: tuple[str, ...] | None = policies_option(LIVE_POLICIES)
    gamma_max: int | None = option(
        "--gamma-max", "longest speculation a policy may choose (default: num_speculative_tokens"
        f" when given, else {DEFAULT_GAMMA_MAX})", default=None)
    spec_tokens: int | None = option(
        "--spec-tokens", "the engine's num_speculative_tokens, as vLLM's flag (default: "
        "--gamma-max)", default=None, group=DRAFTER_GROUP)
    draft_kv: str | None = option(
        "--draft-kv", "at gamma 0, keep the draft's KV in sync (vLLM's behaviour) or skip the "
        f"draft (default: {DEFAULT_DRAFT_KV}; sync on vLLM 0.34, which cannot skip it)",
        default=None, choices=DRAFT_KV_MODES)
    offload: str = option(
        "--offload", "elastic draft memory: move the draft out of device memory when its KV "
        "blocks are worth more to waiting requests; auto = on with --alias-draft for a drafter"
        " with weights (the freed bytes become KV blocks), off otherwise; on = the emulation (a"
        " ballast withheld while the draft is resident)", default=DEFAULT_OFFLOAD,
        choices=OFFLOAD_MODES)
    # The memory controller's thresholds (nightjar.core.memory.MemoryConfig's fields).
    low_water_blocks: int | None = option(
        "--low-water-blocks", "offload when free KV blocks stay below this", default=None,
        group=MEMORY_GROUP)
    k_offload: int | None = option("--k-offload", "consecutive low steps before an offload",
                                   default=None, group=MEMORY_GROUP)
    k_reload: int | None = option("--k-reload", "consecutive roomy steps before a reload",
                                  default=None, group=MEMORY_GROUP)
    reload_hold_s: float | None = option(
        "--reload-hold-s", "the room for the draft must last this long (s)", default=None,
        group=MEMORY_GROUP)
    min_dwell_s: float | None = option(
        "--min-dwell-s", "least stay resident/offloaded after a move (s)", default=None,
        group=MEMORY_GROUP)
    regret_window_s: float | None = option(
        "--regret-window-s", "an offload this soon after a reload is a regret (s)",
        default=None, group=MEMORY_GROUP)
    max_dwell_s: float | None = option(
        "--max-dwell-s", "cap on the offloaded dwell that regrets double (s)", default=None,
        group=MEMORY_GROUP)
    no_reload_on_gain: bool = option(
        "--no-reload-on-gain", "reload only when KV room lasts, never early for forgone "
        "speculation gain", default=False, group=MEMORY_GROUP, action="store_true")
    no_offload_on_capacity: bool = option(
        "--no-offload-on-capacity", "offload only after the policy chose gamma 0 (not when the"
        " draft's blocks are worth more to waiting requests than speculation buys)",
        default=False, group=MEMORY_GROUP, action="store_true")
    reload_cost_s: float | None = option(
        "--reload-cost-s", "seconds a reload costs, weighed against the forgone gain (default:"
        " estimated from --profile when it is a nightjar profile; without either that reload "
        "is off)", default=None, group=MEMORY_GROUP)
    reload: str = option(
        "--reload", "how a reload empties the draft's KV region: wait for its blocks to free "
        "(drain) or copy them out at once (migrate)", default="drain",
        choices=["drain", "migrate"])
    profile: str | None = option(
        "--profile", "step-time prior for nightjar+/dsd: a profile (bundled name or JSON), a "
        "step table measured by an earlier live run (DIR/<policy>/step_table.json), or "
        "roofline:GPU (the roofline of this target and draft on a catalogue GPU, nightjar "
        "profile --list); without one nightjar+ learns from a neutral shape", default=None)
    profile_out: Path | None = option(
        "--profile-out", "at the end, write FILE: --profile (a nightjar profile) fitted to "
        "this run's own steps (as nightjar profile --from-run OUT --base PROFILE)",
        default=None, metavar="FILE")
    alias_draft: bool = option(
        "--alias-draft", "keep the draft's weights inside the withheld KV blocks (real reclaim;"
        " on CPU the draft's linears run slower, docs/kernels.md); needs --offload on; the "
        "ballast is sized from the draft's tensor shapes", default=False, action="store_true")
    ballast_blocks: int | None = option(
        "--ballast-blocks", "KV blocks the draft stands for (default: its weight bytes)",
        default=None)
    rate_scale: float | None = option(
        "--rate-scale", "multiply the trace's request rate by S: arrival times divided by S (10"
        " replays ten times faster; default 1), as nightjar sim and sweep", default=None,
        metavar="S")
    request_rate: float | None = option(
        "--request-rate", "requests per second on average, as vLLM's bench spells it: the "
        "trace's arrivals scaled so that its mean rate is R; instead of --rate-scale, as in "
        "nightjar sim", default=None, metavar="R")
    burstiness: float | None = option(
        "--burstiness", "draw the arrivals as vLLM's bench does: gamma-distributed gaps of "
        "shape B at the trace's mean rate, seeded by --seed; 1 = Poisson, below 1 burstier "
        "(default: the trace's own arrival times), as in nightjar sim", default=None,
        metavar="B")
    time_scale: float | None = option(
        "--time-scale", "deprecated: multiply arrival times by T, the same as --rate-scale 1/T",
        default=None)
    max_requests: int | None = max_requests_option()
    max_model_len: int = option("--max-model-len", "vLLM max_model_len (tokens)",
                                default=DEFAULT_MAX_MODEL_LEN)
    max_num_seqs: int = option("--max-num-seqs",
                               "vLLM max_num_seqs (batch cap), as in nightjar sim",
                               default=DEFAULT_MAX_NUM_SEQS)
    max_num_batched_tokens: int = option(
        "--max-num-batched-tokens", "vLLM max_num_batched_tokens (step token budget), as in "
        "nightjar sim", default=DEFAULT_MAX_NUM_BATCHED_TOKENS)
    kv_cache_gb: float | None = option("--kv-cache-gb", "KV pool size per rank (GiB)",
                                       default=None)
    tensor_parallel_size: int = option(
        "--tensor-parallel-size", "ranks to shard target and draft over (vLLM's TP); on CPU "
        "each rank gets its own cores unless VLLM_CPU_OMP_THREADS_BIND is set", default=1,
        aliases=("-tp",))
    compile: bool = option("--compile", "let vLLM torch.compile the model (slow warm-up on CPU)",
                           default=False, action="store_true")
    seed: int = seed_option("policy")
    out: Path | None = out_option()
    force: bool = force_option()
    no_report: bool = option("--no-report", "skip the HTML report", default=False,
                             action="store_true")
    verbose: bool = option(
        "--verbose", "show vLLM's whole log (by default warnings only; the full log is in "
        "OUT/vllm.log either way)", default=False, action="store_true")
    quiet: bool = quiet_option()
    report_cdn: bool = option(
        "--report-cdn", "load plotly.js from its CDN in the report (small file, needs network)",
        default=False, action="store_true")
    serve: bool = option("--serve", "run vLLM's OpenAI server with Nightjar instead of a trace",
                         default=False, action="store_true")
    slo_ttft: float = slo_ttft_option()
    slo_tpot: float = slo_tpot_option()
    format: str = option("--format", "tables as CSV (default) or parquet (needs pyarrow)",
                         default="csv", choices=["csv", "parquet"])
    host: str = option("--host", "--serve: address to listen on", default="127.0.0.1")
    port: int = option("--port", "--serve: port to listen on", default=8000)
    # Test hook, hidden from --help: forced residency moves at given engine steps
    # ("40:offload,80:reload") or milliseconds after the first step ("t500:offload"),
    # so load tests get offload/reload cycles on demand.
    forced_residency: str | None = option("--forced-residency", default=None, hidden=True)
    # The flags nightjar live does not own (vLLM's engine flags), and those after --
    # (its server's): kept by the command line's parser (nightjar.cli.parse).
    vllm_flags: tuple[str, ...] = option(None, default=())
    server_args: tuple[str, ...] = option(None, default=())

    def thresholds(self) -> dict[str, Any]:
        """The memory controller's thresholds as given (None: not given)."""
        from nightjar.live.elastic import THRESHOLDS

        return {name: getattr(self, name) for name in THRESHOLDS}

    def memory(self) -> MemoryConfig | None:
        """``LiveSettings.memory`` (:func:`nightjar.live.elastic.memory_config`)."""
        from nightjar.live.elastic import memory_config

        return memory_config(self.offload, self.alias_draft, self.reload, self.thresholds(),
                             reload_on_gain=not self.no_reload_on_gain,
                             offload_on_capacity=not self.no_offload_on_capacity)
