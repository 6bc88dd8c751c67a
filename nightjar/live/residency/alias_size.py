"""The ballast an aliased draft needs, from its weight files' shapes and the KV layout.

With ``--alias-draft`` the ballast region must hold the draft's parameters laid out
as :mod:`nightjar.live.residency.alias` lays them (tensors whole where they fit,
the larger ones split by rows over several layers' chunks). The scheduler and every
worker call :func:`alias_ballast_blocks` with the same inputs (the draft's
safetensors headers, the engine's KV cache config), so they agree on the region
without talking; the worker then plans its loaded parameters into it and stops with
the size to give if they do not fit (vLLM fuses q/k/v and gate/up, which moves
tensors between chunks, never bytes: the region is sized from the same bytes).

Reads only file headers (JSON), never weights.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path
from typing import Any

from nightjar.live.residency.alias import blocks_needed

# vLLM places each parameter at a 64-byte-aligned offset (alias.AliasedParking's default).
ALIGN = 64


def file_shapes(model_path: str) -> list[tuple[int, ...]]:
    """The shape of every tensor in the model directory's ``*.safetensors`` files."""
    shapes: list[tuple[int, ...]] = []
    for path in sorted(Path(model_path).glob("*.safetensors")):
        with path.open("rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(length))
        for name, entry in header.items():
            if name != "__metadata__":
                shapes.append(tuple(int(d) for d in entry["shape"]))
    return shapes


def layer_block_bytes(kv_cache_config: Any) -> list[int]:
    """One KV block's bytes in each attention layer, in the config's group order."""
    out: list[int] = []
    for group in kv_cache_config.kv_cache_groups:
        out += [int(group.kv_cache_spec.page_size_bytes)] * len(group.layer_names)
    return out


def alias_blocks(
    shapes: list[tuple[int, ...]], elem_bytes: int, block_bytes: list[int], ranks: int = 1
) -> int:
    """Ballast blocks for tensors of ``shapes`` (one rank's share of each at TP > 1)."""
    sizes, rows = [], []
    for shape in shapes:
        if len(shape) >= 2:
            row = math.prod(shape[1:]) * elem_bytes
            # Vocabulary and column shards split dim 0, row shards dim 1: either way a
            # rank holds about 1/ranks of the bytes in rows this wide or narrower.
            n = -(-shape[0] // ranks)
            sizes.append(n * row)
            rows.append(row)
        else:
            sizes.append(math.prod(shape) * elem_bytes)
            rows.append(0)
    if not sizes or not block_bytes:
        return 0
    return int(blocks_needed(sizes, block_bytes, ALIGN, rows))


def alias_ballast_blocks(vllm_config: Any, kv_cache_config: Any) -> int:
    """The blocks the aliased draft of this engine needs, per rank (0 without a draft)."""
    spec = vllm_config.speculative_config
    if spec is None or spec.draft_model_config is None:
        return 0
    draft = spec.draft_model_config
    elem = int(draft.dtype.itemsize)
    ranks = int(vllm_config.parallel_config.tensor_parallel_size)
    return alias_blocks(
        file_shapes(draft.model), elem, layer_block_bytes(kv_cache_config), ranks
    )
