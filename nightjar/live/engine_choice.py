"""What a live run asks of its engine, checked: the models, the drafter, the two
speculation lengths, the engine's sizes and vLLM's own flags; and the
:class:`~nightjar.live.engine_spec.EngineSpec` each policy's run starts."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from nightjar.core.defaults import (
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
)
from nightjar.live.engine_spec import EngineSpec
from nightjar.live.settings import LiveSettings


@dataclass(frozen=True)
class EngineSizes:
    """The engine's capacity and start-up, as the user gave them."""

    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_num_batched_tokens: int = DEFAULT_MAX_NUM_BATCHED_TOKENS
    kv_cache_gb: float | None = None  # None: vLLM sizes the pool itself
    compile: bool = False  # let vLLM torch.compile the model
    load_progress: bool = False  # vLLM's weight-loading progress bar
    tensor_parallel_size: int = 1


@dataclass(frozen=True)
class EngineChoice:
    """The drafter and vLLM's own flags, checked."""

    target: str
    method: str
    draft: str | None  # the drafter's checkpoint (a draft model, an EAGLE head)
    options: Mapping[str, Any]
    gamma_max: int
    spec_tokens: int
    vocab: int
    engine_args: Mapping[str, Any]  # vLLM flags as AsyncEngineArgs keywords (replay)
    sizes: EngineSizes = field(default_factory=EngineSizes)

    def spec(self, settings: LiveSettings, serve: bool = False) -> EngineSpec:
        """The engine one policy's run starts; a policy that never speculates
        (``nospec``, see ``spec_needs_draft``) runs without a drafter. ``serve``: the
        user's vLLM flags go to vLLM's server as given, not as engine arguments."""
        from nightjar.policies.registry import spec_needs_draft

        speculate = spec_needs_draft(settings.policy)
        sizes = self.sizes
        return EngineSpec(
            target=self.target,
            draft=self.draft if speculate else None,
            settings=settings,
            max_model_len=sizes.max_model_len,
            max_num_seqs=sizes.max_num_seqs,
            max_num_batched_tokens=sizes.max_num_batched_tokens,
            kv_cache_bytes=int(sizes.kv_cache_gb * 2**30) if sizes.kv_cache_gb else None,
            enforce_eager=not sizes.compile,
            spec_tokens=self.spec_tokens,
            load_progress=sizes.load_progress,
            tensor_parallel_size=sizes.tensor_parallel_size,
            method=self.method,
            spec_options=dict(self.options),
            speculate=speculate,
            engine_args={} if serve else dict(self.engine_args),
        )

    def served(self, settings: LiveSettings, vllm_flags: Sequence[str],
               server_args: Sequence[str]) -> tuple[EngineSpec, list[str]]:
        """``--serve``: the engine and the flags vLLM's server is given (the user's
        engine flags, then those after ``--``). A user's ``--additional-config`` would
        replace Nightjar's: it is taken out of the flags and passed merged instead."""
        from nightjar.live.vllm_args import take_flag

        spec = self.spec(settings, serve=True)
        flags = list(vllm_flags) + [a for a in server_args if a != "--"]
        if "additional_config" in self.engine_args:
            flags = take_flag(flags, "--additional-config")
            extra_config = {"additional_config": self.engine_args["additional_config"]}
            spec = dataclasses.replace(spec, engine_args=extra_config)
        return spec, flags
