"""The drafter a live run speculates with, resolved on disk and checked against the
target before any engine starts (the choice itself: :mod:`nightjar.live.drafters`)."""

from __future__ import annotations

import json
from typing import Any

from nightjar.core.drafter import DRAFT_MODEL, drafter_kind
from nightjar.errors import NightjarInputError
from nightjar.live.drafters import DrafterChoice, check_fit, check_method, detect_method


def speculative_config_json(text: str) -> dict[str, Any]:
    """``--speculative-config`` given as text (schedule, measured profiling): a JSON
    object, or one line saying what it is instead."""
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NightjarInputError(f"--speculative-config: not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise NightjarInputError("--speculative-config must be a JSON object")
    return config


def method_given(speculative_config: dict[str, Any] | None, spec_method: str | None) -> bool:
    """Whether the user named vLLM's method (else a checkpoint's own config says it)."""
    return spec_method is not None or "method" in (speculative_config or {})


def resolve_drafter(choice: DrafterChoice, model_arg: str, target: str,
                    method_named: bool) -> tuple[str, str | None]:
    """(method, the resolved checkpoint or None) for ``choice`` with the target
    ``model_arg`` (a preset brings its draft model when none is named)."""
    from nightjar.live.models import default_draft, resolve_model

    model = choice.model
    method = choice.method
    if model is None and method == DRAFT_MODEL and not choice.explicit:
        model = default_draft(model_arg)  # the preset's pair
    draft = resolve_model(model, "draft") if model else None
    if draft is not None and choice.method == DRAFT_MODEL and not method_named:
        method = detect_method(draft)  # vLLM detects an EAGLE head the same way
    check_method(method)
    # No drafter named and none found: a nospec-only run needs none;
    # policy_check.check_drafter_present refuses the policies that would speculate.
    named = choice.explicit and drafter_kind(method).needs_model
    if named or draft is not None or method == "mtp":
        check_fit(method, target, draft)
    return method, draft
