"""Which drafter a live run speculates with, from the flags a vLLM user would give.

vLLM's ``--speculative-config`` JSON (and its shorthand ``--spec-method``,
``--spec-model``, ``--spec-tokens``) names the method, its checkpoint and its
length; Nightjar's older ``--draft PATH`` is ``--spec-model PATH``. Two spellings of
one key are refused, as vLLM refuses them. Then the drafter is checked against the
target before any engine starts: a method the installed vLLM lacks or Nightjar does
not drive, a checkpoint that does not fit the target (vocabulary, hidden size,
architecture), a target without MTP layers, a lookup given a model. Imports
neither vllm nor torch (the installed vLLM's method list is read lazily).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nightjar.core.drafter import DRAFT_MODEL, DRAFTERS, drafter_kind
from nightjar.errors import NightjarInputError
from nightjar.live.models import read_config

# speculative_config keys Nightjar refuses, with the reason.
REFUSED_KEYS = {
    "num_speculative_tokens_per_batch_size": "Nightjar's policy sets K every step, which "
    "replaces vLLM's static batch-size table (for stock vLLM, `nightjar schedule` prints "
    "a tuned one)",
}


@dataclass(frozen=True, slots=True)
class DrafterChoice:
    """The drafter the flags ask for. ``model`` is the checkpoint as given (resolved
    later); ``spec_tokens`` None: not given (gamma_max then sets it)."""

    method: str = DRAFT_MODEL
    model: str | None = None
    spec_tokens: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    # Whether the user named the drafter (else the preset's draft model is used).
    explicit: bool = False


def _one(values: dict[str, tuple[str, Any]], key: str, flag: str, value: Any) -> None:
    if value is None:
        return
    if key in values:
        raise NightjarInputError(
            f"{flag} and {values[key][0]} set the same thing ({key}): give one"
        )
    values[key] = (flag, value)


def choose_drafter(
    speculative_config: Mapping[str, Any] | None,
    spec_method: str | None = None,
    spec_model: str | None = None,
    spec_tokens: int | None = None,
    draft: str | None = None,
) -> DrafterChoice:
    """The drafter the flags describe; one spelling per setting."""
    values: dict[str, tuple[str, Any]] = {}
    config = dict(speculative_config or {})
    for key in ("method", "model", "num_speculative_tokens"):
        if key in config:
            values[key] = (f"--speculative-config's {key!r}", config.pop(key))
    _one(values, "method", "--spec-method", spec_method)
    _one(values, "model", "--spec-model", spec_model)
    _one(values, "model", "--draft", draft)
    _one(values, "num_speculative_tokens", "--spec-tokens", spec_tokens)
    for key, why in REFUSED_KEYS.items():
        if key in config:
            raise NightjarInputError(f"--speculative-config's {key!r}: {why}")
    method = values.get("method", ("", None))[1]
    model = values.get("model", ("", None))[1]
    k = values.get("num_speculative_tokens", ("", None))[1]
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 0):
        raise NightjarInputError(f"num_speculative_tokens must be an integer >= 0, got {k!r}")
    if method is not None and not isinstance(method, str):
        raise NightjarInputError(f"speculative method must be a string, got {method!r}")
    if model is not None and not isinstance(model, str):
        raise NightjarInputError(f"speculative model must be a path or id, got {model!r}")
    explicit = method is not None or model is not None or bool(config)
    return DrafterChoice(
        method=method or DRAFT_MODEL, model=model, spec_tokens=k, options=config,
        explicit=explicit,
    )


def vllm_methods() -> tuple[str, ...]:
    """The speculative methods the installed vLLM's SpeculativeConfig accepts."""
    from typing import get_args

    from vllm.config.speculative import SpeculativeMethod

    out: list[str] = []

    def walk(t: Any) -> None:
        args = get_args(t)
        if not args:
            out.append(str(t))
        for a in args:
            walk(a)

    walk(SpeculativeMethod)
    return tuple(dict.fromkeys(out))


def check_method(method: str, installed: tuple[str, ...] | None = None) -> None:
    """A method the installed vLLM lacks, or one Nightjar does not drive: one line."""
    if installed is None:
        try:
            installed = vllm_methods()
        except ImportError:  # vLLM's own check runs when the engine starts
            installed = tuple(DRAFTERS)
    known = installed
    if method not in known:
        raise NightjarInputError(
            f"speculative method {method!r}: the installed vLLM has no such method "
            f"(it has {', '.join(known)})"
        )
    if method not in DRAFTERS:
        raise NightjarInputError(
            f"speculative method {method!r}: Nightjar drives {', '.join(DRAFTERS)}; "
            f"{method} is not among them"
        )
    if method == "suffix" and importlib.util.find_spec("arctic_inference") is None:
        raise NightjarInputError(
            "speculative method 'suffix' needs arctic-inference, which is not installed "
            "(pip install arctic-inference)"
        )


def detect_method(model_dir: str) -> str:
    """The method a checkpoint is for, as vLLM detects it (an EAGLE head says so in
    its architectures), else a draft model."""
    archs = " ".join(str(a) for a in read_config_raw(model_dir).get("architectures", []))
    if "Eagle3" in archs:
        return "eagle3"
    if "Eagle" in archs:
        return "eagle"
    return DRAFT_MODEL


def read_config_raw(model_dir: str) -> dict[str, Any]:
    import json
    from pathlib import Path

    try:
        data: dict[str, Any] = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise NightjarInputError(f"cannot read {model_dir}/config.json: {exc}") from None
    return data


def mtp_layers(config: Mapping[str, Any]) -> int:
    """MTP layers a target's config declares (DeepSeek-V3, MiMo, GLM-4.5: the key
    ``num_nextn_predict_layers``; Qwen3-Next: ``num_mtp_layers``... both read)."""
    for key in ("num_nextn_predict_layers", "num_mtp_layers", "mtp_num_hidden_layers"):
        value = config.get(key)
        if isinstance(value, int) and value > 0:
            return value
    return 0


def check_fit(method: str, target_dir: str, model_dir: str | None) -> None:
    """The drafter fits the target, or a one-line error naming what does not."""
    kind = drafter_kind(method, "speculative method")
    if not kind.needs_model and model_dir is not None and method != "mtp":
        raise NightjarInputError(
            f"the {method} drafter looks tokens up and loads no model: drop its model "
            f"({model_dir})"
        )
    if kind.needs_model and model_dir is None:
        raise NightjarInputError(
            f"the {method} drafter needs a checkpoint: give --speculative-config "
            "'{\"model\": ...}' (or --spec-model / --draft)"
        )
    target = read_config(target_dir)
    if method == "mtp":
        if model_dir is not None:
            raise NightjarInputError(
                "the mtp drafter is the target's own MTP layers: drop its model "
                f"({model_dir})"
            )
        if mtp_layers(target) == 0:
            raise NightjarInputError(
                f"the mtp drafter needs a target with MTP layers (num_nextn_predict_layers); "
                f"{target_dir} has none"
            )
        return
    if model_dir is None:
        return
    draft = read_config(model_dir)
    tv, dv = target.get("vocab_size"), draft.get("vocab_size")
    if tv != dv:
        raise NightjarInputError(
            f"{method} drafter vocabulary ({dv} tokens, {model_dir}) differs from the "
            f"target's ({tv} tokens, {target_dir}); a drafter must share the target's "
            "tokenizer"
        )
    if method in ("eagle", "eagle3"):
        _check_head(method, target, draft, target_dir, model_dir)
    elif detect_method(model_dir) != DRAFT_MODEL:
        raise NightjarInputError(
            f"{model_dir} is an {detect_method(model_dir)} head, not a draft model: give "
            f"--speculative-config '{{\"method\": \"{detect_method(model_dir)}\", ...}}'"
        )


def _check_head(method: str, target: Mapping[str, Any], head: Mapping[str, Any],
                target_dir: str, head_dir: str) -> None:
    width = head.get("target_hidden_size", head.get("hidden_size"))
    if width != target.get("hidden_size"):
        raise NightjarInputError(
            f"{method} head {head_dir} reads hidden states {width} wide; the target "
            f"{target_dir} has hidden size {target.get('hidden_size')}: the head was "
            "trained for another model"
        )
    archs = " ".join(str(a) for a in read_config_raw(head_dir).get("architectures", []))
    if "Eagle" not in archs and head.get("num_hidden_layers", 1) > 2:
        raise NightjarInputError(
            f"{head_dir} looks like a full model ({head.get('num_hidden_layers')} layers, "
            f"architectures {archs or 'none'}), not an {method} head: for a draft model "
            "use method draft_model"
        )
