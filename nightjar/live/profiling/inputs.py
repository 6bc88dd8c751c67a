"""What a measured profile is asked to measure, read and checked before any engine
starts: the grids, the prompts, the profile ``--add-mixed-to`` tops up, the drafter."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nightjar.errors import NightjarInputError
from nightjar.live.drafter_setup import speculative_config_json

if TYPE_CHECKING:
    from nightjar.live.profiling.profiler import ProfilePlan


def _numbers(text: str, flag: str, kind: type[Any], what: str) -> tuple[Any, ...]:
    try:
        return tuple(sorted(kind(x) for x in text.split(",")))
    except ValueError:
        raise NightjarInputError(f"{flag} must be comma-separated {what}, got {text!r}") from None


def int_list(text: str, flag: str) -> tuple[int, ...]:
    """Comma-separated integers, sorted (a ``--mixed...`` grid may be '': none)."""
    if flag.startswith("--mixed") and not text.strip():
        return ()
    return _numbers(text, flag, int, "integers")


def batch_sizes(text: str | None, cap: int) -> tuple[int, ...]:
    """``--batch-sizes`` as given, else 1, 2, 4, ... up to ``--max-num-seqs``."""
    from nightjar.live.profiling.grid import doubling
    from nightjar.profile.format import MAX_BATCH_SIZE

    if not 1 <= cap <= MAX_BATCH_SIZE:
        raise NightjarInputError(f"--max-num-seqs must be in 1..{MAX_BATCH_SIZE}, got {cap}")
    return doubling(cap) if text is None else int_list(text, "--batch-sizes")


def seconds_list(text: str, flag: str) -> tuple[float, ...]:
    """Seconds (``--wake-pauses``); '' is none."""
    return _numbers(text, flag, float, "seconds") if text.strip() else ()


def model_name(arg: str) -> str:
    """The model's name in the profile: a preset or HF id as given, else the folder name."""
    path = Path(arg).expanduser()
    return path.resolve().name if path.is_dir() else arg.rsplit("/", 1)[-1]


def read_prompts(path: str | None) -> tuple[str, ...]:
    """``--prompts``: one prompt per non-blank line (none without a file)."""
    if not path:
        return ()
    from nightjar.reading import as_path, read_text

    # One prompt per "\n" line: a prompt may hold U+2028 and the like.
    text = read_text(as_path(path, "--prompts"), f"--prompts {path}")
    lines = [line.rstrip("\r") for line in text.split("\n")]
    texts = tuple(line for line in lines if line.strip())
    if not texts:
        raise NightjarInputError(f"--prompts {path}: no prompts (one per line)")
    return texts


def base_profile(path: str | None) -> dict[str, Any] | None:
    """The profile ``--add-mixed-to`` tops up, checked before any engine starts."""
    if path is None:
        return None
    from nightjar.profile.profile import load_profile

    if not Path(path).is_file():
        raise NightjarInputError(f"--add-mixed-to {path}: no such profile file")
    return load_profile(path).to_json()


def with_mixed(base: dict[str, Any], plan: ProfilePlan, rows: list[Any]) -> dict[str, Any]:
    """``base`` with the mixed table measured now; the command and notes say so."""
    from nightjar.profile.document import MixedRow
    from nightjar.profile.document import with_mixed as topped_up

    if not rows:
        raise NightjarInputError("--add-mixed-to: --mixed-batch-sizes/--mixed-tokens are empty")
    notes = (
        f"{base.get('notes', '')} Mixed-step table added later by: {plan.command} "
        f"(at load {os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%dT%H:%M:%S%z')}), "
        "each cell rescaled by this profile's decode step over the decode step measured "
        "in the same window."
    ).strip()
    return topped_up(base, [MixedRow(*row) for row in rows], notes)


def speculative_config(text: str | None) -> dict[str, Any] | None:
    """``--speculative-config`` in measured profiling: a JSON object without
    ``num_speculative_tokens`` (the gammas set it)."""
    if text is None:
        return None
    config = speculative_config_json(text)
    if "num_speculative_tokens" in config:
        raise NightjarInputError("--speculative-config: num_speculative_tokens comes from "
                                 "--gammas (their largest) in measured profiling")
    return config


def measured_drafter(
    model_arg: str, target: str, drafter: str | None, config_text: str | None,
    draft: str | None,
) -> tuple[str, str | None, str | None, dict[str, Any]]:
    """(method, the drafter's checkpoint as given, resolved, its other config keys):
    ``drafter`` is vLLM's method (``--drafter``), ``config_text`` its whole config
    (``--speculative-config``; the gammas set ``num_speculative_tokens``), ``draft`` its
    model (``--draft``); one spelling each. A preset brings its draft model."""
    from nightjar.core.drafter import DRAFT_MODEL, drafter_kind
    from nightjar.live.drafters import check_fit, check_method, choose_drafter, detect_method
    from nightjar.live.models import default_draft, resolve_model

    config = speculative_config(config_text)
    choice = choose_drafter(config, drafter, None, None, draft)
    method, model = choice.method, choice.model
    if model is None and method == DRAFT_MODEL:
        model = default_draft(model_arg)
        if model is None:
            raise NightjarInputError("measured profiling needs a draft model (--draft PATH)")
    resolved = resolve_model(model, "draft") if model else None
    if resolved is not None and drafter is None and "method" not in (config or {}):
        method = detect_method(resolved)
    check_method(method)
    if drafter_kind(method).needs_model or resolved is not None or method == "mtp":
        check_fit(method, target, resolved)
    return method, model, resolved, dict(choice.options)
