"""Tiny random-weight Llama models for tests and smoke runs (no network, no hub).

The *agreeing* pair reproduces the speculative trade-off on a CPU: the target's
layers after the first have their output projections (``o_proj``, ``down_proj``)
damped, so the residual stream is dominated by the embedding and the first layer;
a one-layer draft that shares the embedding, first layer, final norm and head then
predicts the target's greedy token often. The damping sets how often: at 0.1 (the
default) the draft agrees on about 84% of greedy positions, so fixed:3 clearly
beats no speculation at batch 1 and loses at batch 32, but gamma 1 still ties at
batch 64; at 0.4 (:data:`WEAK`) it agrees on about 55%, and every gamma > 0 loses
at batch 64 while speculation still wins at batch 1.
A *random* draft shares nothing and is accepted almost never; a *foreign* draft
has a different vocabulary (for error tests).

Usage: ``python -m nightjar.live.tiny OUT_DIR [--small]`` writes ``target/``,
``draft/``, ``draft-random/`` and ``draft-foreign-vocab/`` under ``OUT_DIR``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Imported lazily by callers through nightjar.live only; torch is fine here.
import torch


@dataclass(frozen=True, slots=True)
class TinySpec:
    """Shape of a tiny Llama. The default is the pair measured in the design guide."""

    layers: int = 8
    hidden: int = 1024
    intermediate: int = 2752
    heads: int = 16
    kv_heads: int = 4
    vocab: int = 8192
    max_len: int = 2048
    seed: int = 0
    # Scale of the target's damped output projections (layers 2..N): larger means
    # the layers the draft lacks matter more, so the draft agrees less often.
    damping: float = 0.1


# Small enough for the lossless tests to run quickly on two cores.
SMALL = TinySpec(layers=4, hidden=256, intermediate=688, heads=4, kv_heads=2, vocab=2048)
# The default size with a weaker draft: no gamma pays at high load (policy tests).
WEAK = TinySpec(damping=0.4)


@dataclass(frozen=True, slots=True)
class TinyModels:
    target: Path
    draft: Path  # agrees with the target
    draft_random: Path
    draft_foreign_vocab: Path


def _tokenizer(vocab: int, out: Path) -> None:
    """A word-level tokenizer over the words ``w0..wN``: enough for vLLM to detokenize."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<unk>", "<s>", "</s>"] + [f"w{i}" for i in range(vocab - 3)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(  # type: ignore[no-untyped-call, unused-ignore]
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.save_pretrained(str(out))


def _config(spec: TinySpec, layers: int, vocab: int) -> Any:
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab,
        hidden_size=spec.hidden,
        intermediate_size=spec.intermediate,
        num_hidden_layers=layers,
        num_attention_heads=spec.heads,
        num_key_value_heads=spec.kv_heads,
        max_position_embeddings=spec.max_len,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
        dtype="float32",
    )


def _random_model(spec: TinySpec, layers: int, vocab: int, seed: int) -> Any:
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    model: Any = LlamaForCausalLM(_config(spec, layers, vocab))  # type: ignore[no-untyped-call, unused-ignore]
    # The HF init (std 0.02) gives near-uniform logits; a wider embedding makes the
    # greedy token depend on the input, so that acceptance is meaningful.
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, 1.0)
    return model.eval()


def _save(model: Any, out: Path, vocab: int) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out), safe_serialization=True)
    _tokenizer(vocab, out)


def build(out_dir: str | Path, spec: TinySpec = TinySpec()) -> TinyModels:
    """Write the four models under ``out_dir`` (re-uses them if already complete)."""
    root = Path(out_dir)
    paths = TinyModels(
        root / "target", root / "draft", root / "draft-random", root / "draft-foreign-vocab"
    )
    stamp = root / "tiny.json"
    want = json.dumps(spec.__repr__())
    if stamp.exists() and stamp.read_text() == want:
        return paths

    target: Any = _random_model(spec, spec.layers, spec.vocab, spec.seed)
    with torch.no_grad():
        # Damp every layer but the first: the draft's single layer then carries
        # most of what decides the target's argmax.
        for layer in target.model.layers[1:]:
            layer.self_attn.o_proj.weight.mul_(spec.damping)
            layer.mlp.down_proj.weight.mul_(spec.damping)
    _save(target, paths.target, spec.vocab)

    draft = _random_model(spec, 1, spec.vocab, spec.seed + 1)
    shared = {
        k: v
        for k, v in target.state_dict().items()
        if not k.startswith("model.layers.") or k.startswith("model.layers.0.")
    }
    draft.load_state_dict(shared, strict=True)
    _save(draft, paths.draft, spec.vocab)

    _save(_random_model(spec, 1, spec.vocab, spec.seed + 2), paths.draft_random, spec.vocab)
    foreign = spec.vocab // 2
    _save(_random_model(spec, 1, foreign, spec.seed + 3), paths.draft_foreign_vocab, foreign)
    stamp.write_text(want)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description="Write tiny random Llama test models.")
    parser.add_argument("out", help="directory to write the models into")
    parser.add_argument("--small", action="store_true", help="the small test-suite size")
    args = parser.parse_args()
    models = build(args.out, SMALL if args.small else TinySpec())
    print(json.dumps({k: str(getattr(models, k)) for k in TinyModels.__slots__}, indent=1))


if __name__ == "__main__":
    main()
