"""Model presets and checks done before an engine is started (no vllm, no network).

A model argument is a preset name, a local directory holding ``config.json``, or
a Hugging Face id already in the local cache. Nothing is downloaded: a model that
is not on disk gets a one-line error saying so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError


@dataclass(frozen=True, slots=True)
class Preset:
    target: str
    draft: str


PRESETS: dict[str, Preset] = {
    "vicuna-13b": Preset("lmsys/vicuna-13b-v1.3", "double7/vicuna-68m"),
    "deepseek-r1-distill-qwen-7b": Preset(
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B", "Qwen/Qwen2.5-0.5B-Instruct"
    ),
    "llama-3.1-8b": Preset("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"),
}


def _hf_cache_dir(hf_id: str) -> Path | None:
    """The snapshot directory of a cached Hugging Face model, if any."""
    home = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
    hub = Path(os.environ.get("HF_HUB_CACHE", home / "hub"))
    snapshots = hub / f"models--{hf_id.replace('/', '--')}" / "snapshots"
    found = sorted(snapshots.glob("*/config.json")) if snapshots.is_dir() else []
    return found[-1].parent if found else None


def resolve_model(name: str, role: str = "model") -> str:
    """A local directory for ``name`` (path, preset target or cached HF id), or raise."""
    if name in PRESETS:
        name = PRESETS[name].target
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise NightjarInputError(f"{role} {name!r}: directory has no config.json")
        return str(path)
    looks_like_hf = name.count("/") == 1 and not name.startswith((".", "/", "~"))
    if not looks_like_hf:
        presets = ", ".join(sorted(PRESETS))
        raise NightjarInputError(
            f"unknown {role} {name!r}: not a preset ({presets}), a local directory "
            "or a Hugging Face id"
        )
    cached = _hf_cache_dir(name)
    if cached is None:
        raise NightjarInputError(
            f"{role} {name!r} is not on this machine and nightjar does not download: "
            "fetch it first (huggingface-cli download) or pass a local directory"
        )
    return str(cached)


def default_draft(model_arg: str) -> str | None:
    preset = PRESETS.get(model_arg)
    return preset.draft if preset else None


def read_config(model_dir: str) -> dict[str, Any]:
    from nightjar.reading import read_json

    data = read_json(Path(model_dir) / "config.json", f"{model_dir}/config.json")
    if not isinstance(data, dict):
        raise NightjarInputError(f"{model_dir}/config.json: expected a JSON object")
    # Multimodal / wrapped configs keep the language model's fields inside.
    inner: dict[str, Any] = data.get("text_config", data)
    return inner


def vocab_size(model_dir: str) -> int | None:
    """The model's vocabulary size from its config (None when the config has none)."""
    v = read_config(model_dir).get("vocab_size")
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def check_pair(target_dir: str, draft_dir: str) -> int:
    """Check that a draft can speculate for a target; returns the vocabulary size."""
    tv = read_config(target_dir).get("vocab_size")
    dv = read_config(draft_dir).get("vocab_size")
    if tv != dv:
        raise NightjarInputError(
            f"draft vocabulary ({dv} tokens, {draft_dir}) differs from the target's "
            f"({tv} tokens, {target_dir}); a draft must share the target's tokenizer"
        )
    return int(tv or 32000)


def max_position(model_dir: str) -> int:
    return int(read_config(model_dir).get("max_position_embeddings", 2048))
