"""Tiny random-weight drafters of the kinds vLLM loads besides a draft model.

For a tiny Llama target (:mod:`nightjar.live.tiny`), in the formats vLLM 0.32 reads:

- an **EAGLE-3 head** (``vllm/model_executor/models/llama_eagle3.py``): one decoder
  layer at the target's hidden size whose attention reads ``[embeds, hidden]``
  (2 x hidden wide), an ``fc`` that folds three of the target's hidden states
  (3 x hidden) into one, a final norm and its own LM head; the token embedding is
  not in the checkpoint (vLLM shares the target's). Weight names as the published
  heads spell them (``midlayer.*``, ``fc``, ``norm``, ``lm_head``);
  ``architectures = ["LlamaForCausalLMEagle3"]``.
- an **EAGLE head** (``llama_eagle.py``): ``fc`` over ``[embeds, hidden]`` and one
  decoder layer without its input norm (``layers.0.*``); embedding and LM head are
  the target's.
- an **MTP target** (``mimo_mtp.py``): a MiMo-style model, a Qwen2 decoder plus
  ``num_nextn_predict_layers`` MTP layers stored under ``model.mtp_layers.N``,
  which vLLM loads as the drafter of ``method: "mtp"`` from the target's own files.

Random weights: acceptance is near zero, which is what a losslessness test wants
(every token is the target's). Usage: ``python -m nightjar.live.tiny_heads TARGET OUT``.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path
from typing import Any

import torch

from nightjar.live.tiny import SMALL, TinySpec


def _read(target: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((target / "config.json").read_text())
    return data


def _layer(prefix: str, h: int, inter: int, heads: int, kv_heads: int, q_in: int,
           gen: torch.Generator, *, input_norm: bool = True) -> dict[str, torch.Tensor]:
    """One Llama decoder layer's weights, HF names, attention input ``q_in`` wide."""
    head_dim = h // heads

    def w(rows: int, cols: int) -> torch.Tensor:
        return torch.randn(rows, cols, generator=gen) * 0.02

    out = {
        f"{prefix}.self_attn.q_proj.weight": w(heads * head_dim, q_in),
        f"{prefix}.self_attn.k_proj.weight": w(kv_heads * head_dim, q_in),
        f"{prefix}.self_attn.v_proj.weight": w(kv_heads * head_dim, q_in),
        f"{prefix}.self_attn.o_proj.weight": w(h, heads * head_dim),
        f"{prefix}.mlp.gate_proj.weight": w(inter, h),
        f"{prefix}.mlp.up_proj.weight": w(inter, h),
        f"{prefix}.mlp.down_proj.weight": w(h, inter),
        f"{prefix}.post_attention_layernorm.weight": torch.ones(h),
    }
    if input_norm:
        out[f"{prefix}.input_layernorm.weight"] = torch.ones(h)
    return out


def _save(out: Path, config: dict[str, Any], weights: dict[str, torch.Tensor],
          target: Path) -> Path:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=1))
    save_file({k: v.contiguous() for k, v in weights.items()}, str(out / "model.safetensors"))
    # vLLM reads the drafter's tokenizer files only for its config; copy the target's.
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (target / name).exists():
            shutil.copy(target / name, out / name)
    return out


def _head_config(t: dict[str, Any], arch: str) -> dict[str, Any]:
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
            "vocab_size", "max_position_embeddings", "rms_norm_eps", "bos_token_id",
            "eos_token_id", "rope_theta")
    config = {k: t[k] for k in keys if k in t}
    config.update(architectures=[arch], model_type="llama", num_hidden_layers=1,
                  tie_word_embeddings=False, torch_dtype="float32")
    return config


def build_eagle3(target: str | Path, out: str | Path, seed: int = 0) -> Path:
    """A random EAGLE-3 head for the Llama at ``target``, written to ``out``."""
    target, out = Path(target), Path(out)
    t = _read(target)
    h, v = int(t["hidden_size"]), int(t["vocab_size"])
    gen = torch.Generator().manual_seed(seed)
    weights = _layer("midlayer", h, int(t["intermediate_size"]), int(t["num_attention_heads"]),
                     int(t["num_key_value_heads"]), 2 * h, gen)
    weights["midlayer.hidden_norm.weight"] = torch.ones(h)
    weights["fc.weight"] = torch.randn(h, 3 * h, generator=gen) * 0.02
    weights["norm.weight"] = torch.ones(h)
    weights["lm_head.weight"] = torch.randn(v, h, generator=gen) * 0.02
    config = _head_config(t, "LlamaForCausalLMEagle3")
    # Three distinct target layers feed the head: vLLM's default (2, L/2, L-3) has
    # duplicates for a 4-layer target, which it merges, leaving fc too few inputs.
    layers = int(t["num_hidden_layers"])
    config.update(draft_vocab_size=v, target_hidden_size=h,
                  eagle_aux_hidden_state_layer_ids=[1, layers // 2, layers - 1])
    return _save(out, config, weights, target)


def build_eagle(target: str | Path, out: str | Path, seed: int = 0) -> Path:
    """A random EAGLE (v1) head for the Llama at ``target``, written to ``out``."""
    target, out = Path(target), Path(out)
    t = _read(target)
    h = int(t["hidden_size"])
    gen = torch.Generator().manual_seed(seed)
    weights = _layer("layers.0", h, int(t["intermediate_size"]), int(t["num_attention_heads"]),
                     int(t["num_key_value_heads"]), h, gen, input_norm=False)
    weights["fc.weight"] = torch.randn(h, 2 * h, generator=gen) * 0.02
    return _save(out, _head_config(t, "EagleLlamaForCausalLM"), weights, target)


def build_mtp_target(out: str | Path, spec: TinySpec = SMALL, mtp_layers: int = 1) -> Path:
    """A random MiMo-style target (Qwen2 decoder + ``mtp_layers`` MTP layers) at ``out``."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from nightjar.live.tiny import _tokenizer

    out = Path(out)
    config = Qwen2Config(
        vocab_size=spec.vocab, hidden_size=spec.hidden, intermediate_size=spec.intermediate,
        num_hidden_layers=spec.layers, num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads, max_position_embeddings=spec.max_len,
        tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, dtype="float32",
    )
    torch.manual_seed(spec.seed)
    model: Any = Qwen2ForCausalLM(config)  # type: ignore[no-untyped-call, unused-ignore]
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, 1.0)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    gen = torch.Generator().manual_seed(spec.seed + 5)
    h = spec.hidden
    # MiMo checkpoints number their MTP layers from 0, without vLLM's ``mtp_block``.
    for i in range(mtp_layers):
        p = f"model.mtp_layers.{i}"
        layer = _layer(p, h, spec.intermediate, spec.heads, spec.kv_heads, h, gen)
        # Qwen2 attention has biases on q, k and v.
        for name in ("q", "k", "v"):
            rows = layer[f"{p}.self_attn.{name}_proj.weight"].shape[0]
            layer[f"{p}.self_attn.{name}_proj.bias"] = torch.zeros(rows)
        state.update(layer)
        state[f"{p}.token_layernorm.weight"] = torch.ones(h)
        state[f"{p}.hidden_layernorm.weight"] = torch.ones(h)
        state[f"{p}.final_layernorm.weight"] = torch.ones(h)
        state[f"{p}.input_proj.weight"] = torch.randn(h, 2 * h, generator=gen) * 0.02
    data = config.to_dict()
    data.update(architectures=["MiMoForCausalLM"], num_nextn_predict_layers=mtp_layers,
                torch_dtype="float32")
    data.pop("dtype", None)
    out.mkdir(parents=True, exist_ok=True)
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in state.items()}, str(out / "model.safetensors"))
    (out / "config.json").write_text(json.dumps(data, indent=1))
    _tokenizer(spec.vocab, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="Write tiny random EAGLE/EAGLE-3 heads.")
    parser.add_argument("target", help="a tiny Llama target (python -m nightjar.live.tiny)")
    parser.add_argument("out", help="directory to write eagle/ and eagle3/ into")
    args = parser.parse_args()
    out = Path(args.out)
    print(build_eagle(args.target, out / "eagle"), build_eagle3(args.target, out / "eagle3"))


if __name__ == "__main__":
    main()
