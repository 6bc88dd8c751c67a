"""A model's shape read from its Hugging Face ``config.json`` (``--model-config``).

Only the gated-MLP, grouped-query-attention decoders the roofline models (Llama,
Qwen2/Qwen3, Mistral and their fine-tunes) are read; a mixture-of-experts or a
multimodal config is refused rather than priced as a dense decoder it is not.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.reading import as_path, read_json
from nightjar.roofline.hardware import ModelArch

# vLLM's dtype "auto" serves float32 checkpoints in float16: every dtype here is 2 bytes.
DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "float32": 2}
REQUIRED = (
    "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
    "vocab_size",
)
MOE_KEYS = ("num_experts", "num_local_experts", "n_routed_experts")


def _read_json(path: Path, what: str) -> dict[str, Any]:
    data = read_json(path, f"{what} {path}")
    if not isinstance(data, dict):
        raise NightjarInputError(f"{what} {path} must hold a JSON object")
    return data


def _positive_int(cfg: dict[str, Any], key: str, path: Path) -> int:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise NightjarInputError(f"{path}: {key} must be a positive integer, got {value!r}")
    return value


def tokenizer_ids(path: Path) -> int | None:
    """Token ids a ``tokenizer.json`` uses (largest id + 1), or None when there is none."""
    if not os.path.lexists(path):
        return None
    tok = _read_json(path, "tokenizer")
    vocab = tok.get("model", {}).get("vocab") if isinstance(tok.get("model"), dict) else None
    ids: list[int] = []
    if isinstance(vocab, dict):
        ids += [v for v in vocab.values() if isinstance(v, int)]
    elif isinstance(vocab, list):  # Unigram: a list of [piece, score]
        ids.append(len(vocab) - 1)
    ids += [
        t["id"] for t in tok.get("added_tokens", []) if isinstance(t, dict) and "id" in t
    ]
    return max(ids) + 1 if ids else None


def _name(path: Path, cfg: dict[str, Any]) -> str:
    raw = cfg.get("_name_or_path") or path.parent.name or path.stem
    base = str(raw).rstrip("/").rsplit("/", 1)[-1].lower()
    name = re.sub(r"[^a-z0-9._-]+", "-", base).strip("-.")
    return name or "custom"


def load_model_config(arg: str) -> ModelArch:
    """The shape in a ``config.json`` (or a directory holding one)."""
    path = as_path(arg, "model config")
    if path.is_dir():
        path = path / "config.json"
    cfg = _read_json(path, "model config")
    if "text_config" in cfg and "hidden_size" not in cfg:
        raise NightjarInputError(f"{path}: a multimodal config; give the text model's config")
    moe = [k for k in MOE_KEYS if cfg.get(k)]
    if moe:
        raise NightjarInputError(f"{path}: a mixture-of-experts model ({moe[0]}), not supported")
    missing = [k for k in REQUIRED if k not in cfg]
    if missing:
        raise NightjarInputError(f"{path}: missing {', '.join(missing)}")
    hidden, layers, heads, inter, vocab = (_positive_int(cfg, k, path) for k in REQUIRED)
    kv_heads = (
        _positive_int(cfg, "num_key_value_heads", path)
        if cfg.get("num_key_value_heads") is not None
        else heads
    )
    head_dim = (
        _positive_int(cfg, "head_dim", path) if cfg.get("head_dim") is not None
        else hidden // heads
    )
    if heads % kv_heads:
        raise NightjarInputError(
            f"{path}: num_attention_heads {heads} is not a multiple of num_key_value_heads "
            f"{kv_heads}"
        )
    dtype = cfg.get("torch_dtype", cfg.get("dtype", "bfloat16"))
    if dtype not in DTYPE_BYTES:
        raise NightjarInputError(
            f"{path}: torch_dtype {dtype!r} not one of {', '.join(DTYPE_BYTES)}"
        )
    # Qwen2 always has q/k/v biases and no attention_bias key; Llama-style configs say.
    bias = cfg.get("attention_bias", cfg.get("model_type") == "qwen2")
    arch = ModelArch(
        name=_name(path, cfg),
        hf_id=str(cfg.get("_name_or_path") or path),
        layers=layers,
        hidden=hidden,
        intermediate=inter,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        vocab=vocab,
        params=0,
        dtype_bytes=DTYPE_BYTES[dtype],
        tied_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=bool(bias),
        tokens=tokenizer_ids(path.parent / "tokenizer.json"),
        mtp_layers=_mtp_layers(cfg, path),
        max_len=(_positive_int(cfg, "max_position_embeddings", path)
                 if cfg.get("max_position_embeddings") is not None else None),
    )
    return replace(arch, params=arch.derived_params())


def _mtp_layers(cfg: dict[str, Any], path: Path) -> int:
    value = cfg.get("num_nextn_predict_layers", 0) or 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise NightjarInputError(
            f"{path}: num_nextn_predict_layers must be an integer >= 0, got {value!r}"
        )
    return value
