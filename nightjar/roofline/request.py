"""What ``nightjar profile --roofline`` is asked for, checked: the GPU and the two
shapes (from the catalogue or the user's files), the roofline's parameters, the
deployment pins, and the command line that reproduces the profile."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from nightjar.errors import NightjarInputError

if TYPE_CHECKING:
    from nightjar.roofline.costs import Deployment, RooflineParams
    from nightjar.roofline.hardware import GPU, ModelArch

# Flags that only the roofline reads (a measured profile refuses them).
ROOFLINE_ONLY = ("model_config", "draft_config", "gpu_spec", "tp")
# The flags the stored command line repeats, in its order (after --roofline).
_SHAPES = ("gpu", "gpu_spec", "model", "model_config", "draft", "draft_config", "drafter", "tp")
_PINS = ("activation_reserve_bytes", "gpu_memory_utilization", "block_size",
         "num_gpu_blocks_override", "num_gpu_blocks_no_draft", "max_model_len", "variant",
         "verify_attention")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@dataclass(frozen=True)
class RooflineRequest:
    """The roofline profile asked for; field names are the flags' (``gpu_spec`` is
    ``--gpu-spec``). None: not given."""

    gpu: str | None = None
    gpu_spec: str | None = None
    model: str | None = None
    model_config: str | None = None
    draft: str | None = None
    draft_config: str | None = None
    drafter: str | None = None
    tp: int | None = None
    speculative_config: str | None = None
    activation_reserve_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    block_size: int | None = None
    num_gpu_blocks_override: int | None = None
    num_gpu_blocks_no_draft: int | None = None
    max_model_len: int | None = None
    enforce_eager: bool = False
    verify_attention: str | None = None
    variant: str | None = None
    out: str | None = None

    @property
    def kind(self) -> str:
        """The drafter kind (a separate draft model unless ``--drafter`` says otherwise)."""
        return self.drafter or "draft_model"

    @property
    def ranks(self) -> int:
        return 1 if self.tp is None else self.tp

    def command(self) -> str:
        """The canonical command line that reproduces this profile (stored in the file)."""
        parts = ["nightjar", "profile", "--roofline"]
        for name in (*_SHAPES, *_PINS):
            value = getattr(self, name)
            if value is not None:
                parts += [_flag(name), str(value)]
        if self.enforce_eager:
            parts.append("--enforce-eager")
        if self.out:
            parts += ["--out", self.out]
        return shlex.join(parts)

    def inputs(self) -> tuple[GPU, ModelArch, ModelArch | None]:
        """The GPU and the two shapes, from the catalogue or from the user's files; no
        draft shape for a drafter derived from the target (``--drafter eagle3``, ...)."""
        from nightjar.roofline.drafters import check_kind
        from nightjar.roofline.gpu_spec import parse_gpu_spec
        from nightjar.roofline.hardware import check_same_vocab, get_gpu, get_model
        from nightjar.roofline.model_config import load_model_config
        from nightjar.roofline.tensor_parallel import check_tp

        if self.speculative_config is not None:
            raise NightjarInputError("--speculative-config is for measured profiling; the "
                                     "roofline takes --drafter KIND")
        separate = self.kind == "draft_model"
        pairs = [("gpu", "gpu_spec"), ("model", "model_config"), ("draft", "draft_config")]
        for name, alt in pairs:
            if getattr(self, name) is not None and getattr(self, alt) is not None:
                raise NightjarInputError(f"give --{name} or {_flag(alt)}, not both")
        missing = [
            f"--{name} (or {_flag(alt)})"
            for name, alt in pairs[: 3 if separate else 2]
            if not getattr(self, name) and not getattr(self, alt)
        ]
        if missing:
            raise NightjarInputError(f"--roofline needs {', '.join(missing)}")
        gpu = get_gpu(self.gpu) if self.gpu else parse_gpu_spec(str(self.gpu_spec))
        target = get_model(self.model) if self.model else load_model_config(
            str(self.model_config))
        given = self.draft is not None or self.draft_config is not None
        check_kind(self.kind, target, given)
        check_tp(target, self.ranks)
        if not separate:
            return gpu, target, None
        draft = get_model(self.draft) if self.draft else load_model_config(
            str(self.draft_config))
        check_same_vocab(target, draft)
        check_tp(draft, self.ranks)
        return gpu, target, draft

    def params(self) -> RooflineParams:
        """The roofline's parameters, every pin checked (one-line errors)."""
        from nightjar.roofline.costs import VERIFY_ATTENTION, RooflineParams, eager_params

        params = RooflineParams()
        if self.gpu_memory_utilization is not None:
            if not 0.0 < self.gpu_memory_utilization <= 1.0:
                raise NightjarInputError("--gpu-memory-utilization must be in (0, 1]")
            params = replace(params, gpu_memory_utilization=self.gpu_memory_utilization)
        if self.block_size is not None:
            if self.block_size < 1:
                raise NightjarInputError("--block-size must be >= 1")
            params = replace(params, block_size=self.block_size)
        if self.activation_reserve_bytes is not None and self.activation_reserve_bytes < 0:
            raise NightjarInputError("--activation-reserve-bytes must be >= 0")
        for name in ("num_gpu_blocks_override", "num_gpu_blocks_no_draft", "max_model_len"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise NightjarInputError(f"{_flag(name)} must be >= 1, got {value}")
        if self.variant is not None and not self.variant.replace("-", "").isalnum():
            raise NightjarInputError(
                f"--variant must be letters, digits and '-', got {self.variant!r}")
        if self.enforce_eager:
            params = eager_params(params)
        if self.verify_attention is not None:
            if self.verify_attention not in VERIFY_ATTENTION:
                raise NightjarInputError(
                    f"--verify-attention {self.verify_attention!r}: use one of "
                    f"{', '.join(VERIFY_ATTENTION)}"
                )
            params = replace(params, verify_attention=self.verify_attention)
        return params

    def deployment(self) -> Deployment:
        """The deployment pins (KV blocks with and without the draft, the longest request)."""
        from nightjar.roofline.costs import Deployment

        with_draft = self.num_gpu_blocks_override
        without = self.num_gpu_blocks_no_draft
        return Deployment(
            variant=self.variant, kv_blocks_with_draft=with_draft,
            kv_blocks_without_draft=without if without is not None else with_draft,
            max_model_len=self.max_model_len,
        )

    def out_path(self, gpu: GPU, target: ModelArch, draft: ModelArch | None) -> Path:
        """``--out``, or ``<gpu>[-tpN]__<target>+<draft or kind>.json`` here."""
        if self.out:
            return Path(self.out)
        label = f"{gpu.name}-tp{self.ranks}" if self.ranks > 1 else gpu.name
        dname = draft.name if draft is not None else self.kind
        return Path(f"{label}__{target.name}+{dname}.json")

    def input_files(self) -> list[str]:
        """The user's files the profile is made from (never to be overwritten by it)."""
        return [x for x in (self.gpu_spec, self.model_config, self.draft_config) if x]
