"""Simulator knobs, with vLLM-like defaults."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from nightjar.core.draft_kv import DEFAULT_DRAFT_KV
from nightjar.core.memory import MemoryConfig


class DraftKVMode(StrEnum):
    """What the engine does with the draft's KV cache while gamma = 0.

    SKIP: the draft does not run; its cache goes stale and the next gamma > 0 step
    pays a draft prefill over the missed tokens (the switch cost C_switch).
    SYNC: the draft runs one forward per gamma = 0 step to keep its cache current,
    so switching back is free but every non-speculative step pays a draft forward.
    """

    SKIP = "skip"
    SYNC = "sync"


DEFAULT_DRAFT_KV_MODE = DraftKVMode(DEFAULT_DRAFT_KV)


class AcceptanceModel(StrEnum):
    """How many of a request's ``g`` drafted tokens the target accepts.

    GEOMETRIC: every position is accepted with the request's rate ``a`` until the
    first rejection (mean tokens per step ``(1 - a^(g+1)) / (1 - a)``).
    POSITIONAL: position ``j`` (0-based) is accepted with ``a * decay**j``, the
    front-loaded acceptance measured on real drafts; ``a`` is then the first
    position's rate.
    """

    GEOMETRIC = "geometric"
    POSITIONAL = "positional"


class SchedulerMode(StrEnum):
    """How prompts share steps with decodes (``nightjar sim --engine``).

    V1: vLLM V1's scheduler. Every step serves the running requests first (each
    decode takes ``1 + gamma`` tokens of the step's ``max_num_batched_tokens``), then
    continues any partial prefill, then admits waiting prompts FCFS into what is left
    of the budget; a prompt larger than the rest is prefilled in chunks over several
    steps (chunked prefill), mixed with the decodes.
    V0: the paper's engine (vLLM V0 without chunked prefill). A step either prefills
    whole admitted prompts and decodes nothing, or decodes every running request;
    prefill steps come first whenever a waiting prompt fits.
    """

    V1 = "v1"
    V0 = "v0"


class ReloadMode(StrEnum):
    """How a draft reload takes back the KV blocks it needs (see nightjar.core.memory)."""

    DRAIN = "drain"
    MIGRATE = "migrate"


@dataclass(frozen=True, slots=True)
class SimConfig:
    seed: int = 0
    gamma_max: int = 4
    # vLLM's defaults for a single GPU: at most 256 running sequences, and a
    # per-step token budget shared by prefill and decode.
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    engine: SchedulerMode = SchedulerMode.V1
    # vLLM's max_model_len: the most tokens (prompt + output) one request may hold;
    # None means no limit beyond the KV cache (see nightjar.sim.servable).
    max_model_len: int | None = None
    # nightjar.core.draft_kv.DEFAULT_DRAFT_KV, the default in every engine (why: there).
    draft_kv_mode: DraftKVMode = DEFAULT_DRAFT_KV_MODE
    acceptance_model: AcceptanceModel = AcceptanceModel.GEOMETRIC
    positional_decay: float = 0.9
    reload_mode: ReloadMode = ReloadMode.DRAIN
    # Elastic draft memory (nightjar.core.memory); off means the draft never leaves.
    offload: bool = False
    # The controller's thresholds; ``enabled`` is overridden by ``offload``.
    memory: MemoryConfig = field(default_factory=MemoryConfig)

    def __post_init__(self) -> None:
        if not 0 <= self.seed < 2**63:  # numpy's generators take non-negative seeds
            raise ValueError(f"seed must be in 0..2**63-1, got {self.seed}")
        if self.gamma_max < 0 or self.max_num_seqs < 1 or self.max_num_batched_tokens < 1:
            raise ValueError("gamma_max >= 0, max_num_seqs >= 1, max_num_batched_tokens >= 1")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise ValueError("max_model_len must be >= 1 (or None)")
        if not 0.0 < self.positional_decay <= 1.0:
            raise ValueError("positional_decay must be in (0, 1]")
