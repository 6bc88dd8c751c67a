"""Simulator knobs, with vLLM-like defaults.

The knobs a user sets are fields of the run's settings
(:class:`nightjar.run.config.RunConfig`): :func:`knobs_of` fills each knob from the
setting of its name (or the one its ``setting`` metadata names), so a new setting the
engine reads is a field there and a field of the same name here, with no mapping code.
The defaults here serve the engine's own tests; a run takes the settings' defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from nightjar.core.defaults import (
    DEFAULT_GAMMA_MAX,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
)
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


def _setting(name: str) -> dict[str, str]:
    """Metadata of a knob that reads a setting spelled otherwise (the engine's names
    predate the settings')."""
    return {"setting": name}


@dataclass(frozen=True, slots=True)
class SimConfig:
    seed: int = 0
    gamma_max: int = DEFAULT_GAMMA_MAX
    # vLLM's defaults for a single GPU: at most 256 running sequences, and a
    # per-step token budget shared by prefill and decode.
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    engine: SchedulerMode = SchedulerMode.V1
    # vLLM's max_model_len: the most tokens (prompt + output) one request may hold;
    # None means no limit beyond the KV cache (see nightjar.sim.servable).
    max_model_len: int | None = None
    # nightjar.core.draft_kv.DEFAULT_DRAFT_KV, the default in every engine (why: there).
    draft_kv_mode: DraftKVMode = field(default=DEFAULT_DRAFT_KV_MODE,
                                       metadata=_setting("draft_kv"))
    acceptance_model: AcceptanceModel = field(default=AcceptanceModel.GEOMETRIC,
                                              metadata=_setting("acceptance"))
    positional_decay: float = 0.9
    reload_mode: ReloadMode = field(default=ReloadMode.DRAIN, metadata=_setting("reload"))
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


def knobs_of(settings: Mapping[str, Any], **resolved: Any) -> SimConfig:
    """The knobs a run's ``settings`` (setting name -> value) give: each knob takes the
    setting it reads, as the knob's type; ``resolved`` gives knobs whose value needs
    more than the settings (``offload``: auto resolved for the profile's drafter).
    Knobs no setting names keep their defaults."""
    values: dict[str, Any] = {}
    for knob in dataclasses.fields(SimConfig):
        name = knob.metadata.get("setting", knob.name)
        if knob.name in resolved:
            values[knob.name] = resolved[knob.name]
        elif name in settings:
            value = settings[name]
            values[knob.name] = type(knob.default)(value) if isinstance(
                knob.default, StrEnum) else value
    return SimConfig(**values)
