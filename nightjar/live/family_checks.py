"""What Nightjar refuses on each vLLM family, at start-up, in one line.

A setting the running release cannot honour must stop the engine before it serves,
never fail (or quietly do nothing) in the middle of a run.
"""

from __future__ import annotations

from typing import Any

from nightjar.core.drafter import DrafterKind
from nightjar.errors import NightjarInputError
from nightjar.live.settings import LiveSettings
from nightjar.live.vllm_family import Family


def family_refusal(family: Family, settings: LiveSettings, kind: DrafterKind) -> str | None:
    """Why ``settings`` cannot run on ``family`` with a ``kind`` drafter (None: they can)."""
    if family.worker:
        return None
    release = ", ".join(family.releases)
    moves = settings.memory is not None or settings.forced_residency or settings.alias
    if moves or settings.forced_residency_ms:
        return (f"draft offload and aliasing are not yet supported on vLLM {release} "
                "(its V2 runner has no drafter Nightjar's worker can move): --offload off")
    if settings.draft_kv == "skip" and kind.has_kv and settings.gamma_max > 0:
        return (f"on vLLM {release} the draft runs at K = 0 to keep its KV current; "
                "skipping it is not yet supported: --draft-kv sync")
    return None


def refuse_on_family(
    family: Family, settings: LiveSettings, kind: DrafterKind, vllm_config: Any
) -> None:
    """Raise a one-line NightjarInputError for a combination Nightjar cannot run."""
    if family.runner == "V1" and family.uses_v2_runner(vllm_config):
        raise NightjarInputError(
            "nightjar: vLLM's V2 model runner ignores a per-step K for draft models on "
            f"vLLM {', '.join(family.releases)} and Nightjar's worker wraps the V1 "
            "runner's drafter: set VLLM_USE_V2_MODEL_RUNNER=0"
        )
    why = family_refusal(family, settings, kind)
    if why is not None:
        raise NightjarInputError(f"nightjar: {why}")
