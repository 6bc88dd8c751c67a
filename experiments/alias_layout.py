"""How many ballast blocks the aliased draft needs: whole tensors vs row-split ones.

A layer's region is contiguous, the region across layers is not (docs/kernels.md).
Placed whole, a draft whose largest tensor (embedding, lm_head) is large against
one layer's share needs a region much larger than its bytes; split by rows over
several layers' chunks (what AliasedParking does), the region is the draft's bytes
plus alignment. This prints, per pair, the draft's bytes, the blocks its bytes stand
for ("share"), the blocks whole-tensor placement needs, the blocks row-split
placement needs, the region's bytes over the draft's ("bytes x") and the pieces of
each split tensor (nightjar.live.residency.alias.blocks_needed), from the shapes vLLM
0.32.0 gives the parameters (fused qkv and gate_up; lm_head counted separately,
although Qwen2.5-0.5B ties it to the embedding: the harder case).

Usage: python experiments/alias_layout.py   (needs torch: the live venv)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nightjar.live.residency.alias import blocks_needed, plan_region


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

    def param_shapes(self) -> list[tuple[int, ...]]:
        one = [
            ((self.heads + 2 * self.kv_heads) * self.hd, self.hidden),  # qkv
            (self.hidden, self.heads * self.hd),  # o
            (2 * self.inter, self.hidden),  # gate_up
            (self.hidden, self.inter),  # down
            (self.hidden,),
            (self.hidden,),  # norms
        ]
        return [(self.vocab, self.hidden)] * 2 + [(self.hidden,)] + one * self.layers

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
    print(
        f"{'pair':46s} {'draft MB':>9s} {'share':>6s} {'whole':>6s} {'x':>5s} "
        f"{'split':>6s} {'x':>5s} {'bytes x':>7s}  split tensors: pieces"
    )
    for name, (target, draft, block, elem) in PAIRS.items():
        shapes = draft.param_shapes()
        sizes = [math.prod(s) * elem for s in shapes]
        rows = [math.prod(s[1:]) * elem if len(s) > 1 else 0 for s in shapes]
        per_layer = [target.block_bytes(block, elem)] * target.layers + [
            draft.block_bytes(block, elem)
        ] * draft.layers
        share = -(-sum(sizes) // sum(per_layer))
        whole = blocks_needed(sizes, per_layer, 64)
        split = blocks_needed(sizes, per_layer, 64, rows)
        plan = plan_region(sizes, [split * b for b in per_layer], 64, rows)
        pieces = [len(p) for p in plan if len(p) > 1]
        region = split * sum(per_layer)
        print(
            f"{name:46s} {sum(sizes) / 1e6:9.1f} {share:6d} {whole:6d} {whole / share:5.2f} "
            f"{split:6d} {split / share:5.3f} {region / sum(sizes):7.3f}  {pieces}"
        )


if __name__ == "__main__":
    main()
