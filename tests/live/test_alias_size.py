"""The ballast an aliased draft needs, from its weight files' shapes (alias_size).

The scheduler and every worker size the region from the draft's safetensors headers
and the engine's KV layout; row-splitting the large tensors makes that the draft's
bytes plus alignment, not a multiple of them."""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

import pytest

NEEDS_VLLM = False  # torch is enough (conftest reads this)

pytest.importorskip("torch", reason="torch is not installed (live venv only)")

from nightjar.live.residency.alias import blocks_needed  # noqa: E402
from nightjar.live.residency.alias_size import alias_blocks, file_shapes  # noqa: E402

# The tiny default draft as its files hold it (q/k/v and gate/up unfused), float32.
HIDDEN, INTER, VOCAB, KV = 1024, 2752, 8192, 256
SHAPES = [
    (VOCAB, HIDDEN), (VOCAB, HIDDEN), (HIDDEN,),
    (HIDDEN, HIDDEN), (KV, HIDDEN), (KV, HIDDEN), (HIDDEN, HIDDEN),
    (INTER, HIDDEN), (INTER, HIDDEN), (HIDDEN, INTER), (HIDDEN,), (HIDDEN,),
]  # fmt: skip
# One block of a target layer (8 layers) and of the draft's layer: 128 tokens, K and V.
BLOCKS = [2 * 128 * 4 * 64 * 4] * 9


def _write(path: Path, shapes: list[tuple[int, ...]]) -> None:
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    offset = 0
    for i, shape in enumerate(shapes):
        n = math.prod(shape) * 4
        span = [offset, offset + n]
        header[f"t{i}"] = {"dtype": "F32", "shape": list(shape), "data_offsets": span}
        offset += n
    raw = json.dumps(header).encode()
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        f.truncate(8 + len(raw) + offset)  # the weights themselves are never read


def test_shapes_come_from_the_headers_of_every_file(tmp_path: Path) -> None:
    _write(tmp_path / "model-00001-of-00002.safetensors", SHAPES[:5])
    _write(tmp_path / "model-00002-of-00002.safetensors", SHAPES[5:])
    (tmp_path / "config.json").write_text("{}")
    assert sorted(file_shapes(str(tmp_path))) == sorted(SHAPES)
    assert file_shapes(str(tmp_path / "missing")) == []


def test_region_is_the_drafts_bytes_plus_alignment() -> None:
    total = sum(math.prod(s) * 4 for s in SHAPES)
    share = -(-total // sum(BLOCKS))
    n = alias_blocks(SHAPES, 4, BLOCKS)
    assert share <= n <= math.ceil(share * 1.05), (n, share)
    # Whole-tensor placement (the previous layout) needs 2.5x as many.
    assert blocks_needed([math.prod(s) * 4 for s in SHAPES], BLOCKS, 64) > 2 * n
    # Per rank at TP = 2: half the bytes, so about half the blocks.
    half = alias_blocks(SHAPES, 4, BLOCKS, ranks=2)
    assert -(-share // 2) <= half <= math.ceil(share / 2 * 1.05) + 1, (half, share)
    assert alias_blocks([], 4, BLOCKS) == 0
