"""How many ballast blocks the aliased draft needs when each parameter is placed whole.

A parameter must lie inside one layer's chunk of the region (a layer's region is
contiguous, the region across layers is not: docs/kernels.md), so a draft whose
largest tensor (embedding, lm_head) is large against one layer's share needs a
region much larger than its bytes. This prints, per pair, the draft's bytes, the
blocks its bytes stand for, and the blocks whole-tensor placement needs
(nightjar.live.residency.alias.blocks_needed), from the shapes vLLM 0.32.0 gives
the parameters (fused qkv and gate_up, lm_head separate).

Usage: python benchmarks/alias_layout.py   (needs torch: the live venv)
"""

from __future__ import annotations

from dataclasses import dataclass

from nightjar.live.residency.alias import blocks_needed


@dataclass(frozen=True)
class Llama:
    layers: int
    hidden: int
    inter: int
    heads: int
    kv_heads: int
    vocab: int
    head_dim: int = 0

    @property
    def hd(self) -> int:
        return self.head_dim or self.hidden // self.heads

    def param_elems(self) -> list[int]:
        one = [
            (self.heads + 2 * self.kv_heads) * self.hd * self.hidden,  # qkv
            self.heads * self.hd * self.hidden,  # o
            2 * self.inter * self.hidden,  # gate_up
            self.inter * self.hidden,  # down
            self.hidden,
            self.hidden,  # norms
        ]
        return [self.vocab * self.hidden] * 2 + [self.hidden] + one * self.layers

    def block_bytes(self, block: int, elem: int) -> int:
        return 2 * block * self.kv_heads * self.hd * elem  # K and V, one layer


PAIRS = {
    # (target, draft, KV block tokens, bytes per element): CPU float32, block 128.
    "tiny small (CPU fp32)": (
        Llama(4, 256, 688, 4, 2, 2048),
        Llama(1, 256, 688, 4, 2, 2048),
        128,
        4,
    ),
    "tiny default (CPU fp32)": (
        Llama(8, 1024, 2752, 16, 4, 8192),
        Llama(1, 1024, 2752, 16, 4, 8192),
        128,
        4,
    ),
    "R1-Distill-Qwen-7B + Qwen2.5-0.5B (CUDA bf16)": (
        Llama(28, 3584, 18944, 28, 4, 152064),
        Llama(24, 896, 4864, 14, 2, 151936),
        16,
        2,
    ),
}


def main() -> None:
    print(f"{'pair':46s} {'draft MB':>9s} {'share':>7s} {'whole':>7s} {'x':>6s}")
    for name, (target, draft, block, elem) in PAIRS.items():
        sizes = [n * elem for n in draft.param_elems()]
        per_layer = [target.block_bytes(block, elem)] * target.layers + [
            draft.block_bytes(block, elem)
        ] * draft.layers
        share = -(-sum(sizes) // sum(per_layer))
        whole = blocks_needed(sizes, per_layer, 64)
        print(f"{name:46s} {sum(sizes) / 1e6:9.1f} {share:7d} {whole:7d} {whole / share:6.2f}")


if __name__ == "__main__":
    main()
