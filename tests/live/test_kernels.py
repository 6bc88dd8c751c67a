"""The residency copy kernels (nightjar.live.kernels.ops) against independent references.

Without a GPU the Triton kernels run under the Triton interpreter on CPU tensors:
``TRITON_INTERPRET=1`` is set only while ``nightjar.live.kernels.triton_impl`` is first
imported (that is when ``@triton.jit`` reads it), so engines started by other
tests in this process do not inherit it. With a GPU the compiled kernels run on
CUDA tensors. Every comparison is on raw bytes, so NaN bit patterns compare too.
"""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Callable
from typing import Any

import pytest

NEEDS_VLLM = False  # torch + triton are enough (conftest reads this)

torch = pytest.importorskip("torch", reason="torch is not installed (live venv only)")
pytest.importorskip("triton", reason="triton is not installed (vllm installs it)")

CUDA = torch.cuda.is_available()
if "nightjar.live.kernels.triton_impl" not in sys.modules and not CUDA:
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        import nightjar.live.kernels.triton_impl  # noqa: F401
    finally:
        del os.environ["TRITON_INTERPRET"]

from nightjar.live.kernels.compaction import (  # noqa: E402
    check_pairs,
    plan_compaction,
    remap_block_ids,
    remap_block_table,
)
from nightjar.live.kernels.ops import (  # noqa: E402
    block_runs,
    migrate_blocks,
    pack,
    pack_offsets,
    triton_usable,
    unpack,
)

DEVICE = torch.device("cuda" if CUDA else "cpu")
if not triton_usable(DEVICE):
    pytest.skip(
        "the Triton kernels were loaded in compiled mode before this test could set "
        "TRITON_INTERPRET=1, and there is no GPU",
        allow_module_level=True,
    )

# vLLM 0.32.0's KVCacheLayout: the physical order of the logical axes [L, B, H, N, C].
LAYOUTS = {
    "LBHNC": (0, 1, 2, 3, 4),  # CPU backend
    "LBNHC": (0, 1, 3, 2, 4),  # FlashAttention default on CUDA
    "LHBNC": (0, 2, 1, 3, 4),
    "BLHNC": (1, 0, 2, 3, 4),
    "BHLNC": (1, 2, 0, 3, 4),
}
L, B, H, N, D = 3, 24, 2, 4, 8  # layers, blocks, kv heads, block size, head size


def kv_views(layout: str, dtype: Any, seed: int) -> tuple[Any, list[Any]]:
    """A random byte buffer in ``layout`` and vLLM-style per-layer [B, H, N, 2D] views."""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    logical = (L, B, H, N, 2 * D * itemsize)
    order = LAYOUTS[layout]
    gen = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, [logical[i] for i in order], dtype=torch.uint8, generator=gen)
    raw = raw.to(DEVICE)
    inverse = [order.index(i) for i in range(5)]
    view5 = raw.permute(*inverse)  # logical axis order, physical strides
    return raw, [view5[layer].view(dtype) for layer in range(L)]


def expected_after(raw: Any, layout: str, pairs: list[tuple[int, int]]) -> Any:
    order = LAYOUTS[layout]
    before = raw.permute(*[order.index(i) for i in range(5)]).clone()
    after = before.clone()
    for src, dst in pairs:
        after[:, dst] = before[:, src]
    return after.permute(*order).contiguous()


def random_plan(rng: random.Random, num_blocks: int) -> list[tuple[int, int]]:
    ids = list(range(1, num_blocks))
    rng.shuffle(ids)
    k = rng.randint(1, len(ids) // 2)
    return list(zip(ids[:k], ids[k : 2 * k], strict=True))


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_migrate_matches_reference(layout: str, dtype: str) -> None:
    rng = random.Random(f"{layout}{dtype}")
    for trial in range(2):
        pairs = random_plan(rng, B)
        for backend in ("triton", "torch"):
            raw, views = kv_views(layout, getattr(torch, dtype), seed=trial)
            want = expected_after(raw, layout, pairs)
            migrate_blocks(views, pairs, backend=backend)
            assert torch.equal(raw, want), (backend, pairs)


def test_block_runs_follow_the_layout() -> None:
    page = H * N * 2 * D * 4
    assert block_runs(kv_views("LBHNC", torch.float32, 0)[1][0]) == ([0], page)
    assert block_runs(kv_views("LBNHC", torch.float32, 0)[1][0]) == ([0], page)
    # Head-outer layout: one run per head, a whole head-plane of blocks apart.
    offsets, run = block_runs(kv_views("LHBNC", torch.float32, 0)[1][0])
    assert run == page // H and offsets == [h * B * run for h in range(H)]


def test_migrate_splits_a_long_block_into_tiles() -> None:
    # One block larger than a kernel tile (256 KiB with 8-byte words).
    cache = torch.randn(4, 1, 16, 4200, device=DEVICE)
    want = cache.clone()
    want[0], want[3] = cache[2], cache[1]
    migrate_blocks([cache], [(2, 0), (1, 3)])
    assert torch.equal(cache, want)


def test_migrate_edge_cases_leave_memory_alone() -> None:
    raw, views = kv_views("LBNHC", torch.float32, 7)
    before = raw.clone()
    migrate_blocks(views, [])
    migrate_blocks([], [(1, 2)])
    assert torch.equal(raw, before)
    bad: list[list[tuple[int, int]]] = [
        [(1, 2), (2, 3)],  # chained: 2 is written, then read
        [(2, 3), (1, 2)],  # the same chain listed the other way round
        [(1, 1)],
        [(1, 2), (3, 2)],  # two writes to one block
        [(1, 2), (1, 3)],  # one block moved twice
        [(1, B)],  # out of the pool
        [(-1, 2)],
    ]
    for pairs in bad:
        for backend in ("triton", "torch"):
            with pytest.raises(ValueError):
                migrate_blocks(views, pairs, backend=backend)
    assert torch.equal(raw, before)


def test_plan_compaction_and_remap_keep_every_request_readable() -> None:
    rng = random.Random(3)
    region = range(16, B)  # where the draft's weights will go
    used_ids = rng.sample(range(1, B), 10)
    tables = [used_ids[:4], used_ids[4:7], used_ids[7:]]  # three requests' block tables
    free = [b for b in range(1, B) if b not in used_ids]
    pairs = plan_compaction(region, used_ids, free)
    check_pairs(pairs, B)
    assert {s for s, _ in pairs} == {b for b in used_ids if b in region}
    assert all(d not in region and d in free for _, d in pairs)

    _, views = kv_views("LBNHC", torch.bfloat16, 1)
    content = [[views[0][b].clone() for b in t] for t in tables]
    migrate_blocks(views, pairs)
    for table, blocks in zip(tables, content, strict=True):
        new = remap_block_ids(table, pairs)
        assert not set(new) & set(region)
        for b, old in zip(new, blocks, strict=True):
            assert torch.equal(views[0][b].view(torch.uint8), old.view(torch.uint8))

    padded = torch.tensor([t + [0] * (4 - len(t)) for t in tables], dtype=torch.int32)
    want = torch.tensor([remap_block_ids(t + [0] * (4 - len(t)), pairs) for t in tables])
    assert torch.equal(remap_block_table(padded, pairs), want.to(torch.int32))
    assert torch.equal(remap_block_table(padded, []), padded)


def test_plan_compaction_refuses_what_it_cannot_do() -> None:
    assert plan_compaction(range(8, 10), [1, 2], [3, 9]) == []
    assert plan_compaction(range(8, 11), [9, 8], [5, 10, 3]) == [(8, 3), (9, 5)]
    with pytest.raises(ValueError, match="only 1 free"):
        plan_compaction(range(8, 10), [8, 9], [3])
    with pytest.raises(ValueError, match="both used and free"):
        plan_compaction(range(8, 10), [8, 3], [3])


def param_set(seed: int) -> list[Any]:
    gen = torch.Generator().manual_seed(seed)
    floats = [
        torch.randn(300, 240, generator=gen),  # two copy tiles with 8-byte words
        torch.randn(33, generator=gen).to(torch.bfloat16),
        torch.randn(5, 3, generator=gen).to(torch.float16),
        torch.empty(0),
    ]
    ints = [
        torch.randint(-(2**40), 2**40, (9,), generator=gen),
        torch.randint(0, 256, (40001,), dtype=torch.uint8, generator=gen),  # 2 byte tiles
        torch.randint(0, 2, (11,), generator=gen).bool(),
    ]
    return [t.to(DEVICE) for t in floats + ints]


def as_bytes(t: Any) -> Any:
    return t.reshape(-1).view(torch.uint8)


@pytest.mark.parametrize("align", [1, 2, 256])
def test_pack_round_trip_is_exact(align: int) -> None:
    params = param_set(align)
    offsets, total = pack_offsets(params, align)
    buffers = {}
    for backend in ("triton", "torch"):
        buf = torch.full((total + 64,), 0xA5, dtype=torch.uint8, device=DEVICE)
        pack(params, buf, offsets, backend=backend)
        buffers[backend] = buf
    assert torch.equal(buffers["triton"], buffers["torch"])
    buf = buffers["triton"]
    covered = torch.zeros_like(buf, dtype=torch.bool)
    for p, off in zip(params, offsets, strict=True):
        n = p.numel() * p.element_size()
        assert torch.equal(buf[off : off + n], as_bytes(p))
        covered[off : off + n] = True
    assert bool((buf[~covered] == 0xA5).all())  # nothing outside the slots written

    for backend in ("triton", "torch"):
        back = [torch.empty_like(p) for p in params]
        unpack(back, buf, offsets, backend=backend)
        for got, want in zip(back, params, strict=True):
            assert torch.equal(as_bytes(got), as_bytes(want)), backend


def test_pack_into_a_bf16_buffer_moves_bytes_not_values() -> None:
    params = param_set(9)
    offsets, total = pack_offsets(params, 8)
    buf = torch.zeros(total // 2 + 1, dtype=torch.bfloat16, device=DEVICE)
    pack(params, buf, offsets)
    back = [torch.empty_like(p) for p in params]
    unpack(back, buf, offsets)
    assert all(torch.equal(as_bytes(g), as_bytes(w)) for g, w in zip(back, params, strict=True))


@pytest.mark.parametrize(
    "bad",
    [
        lambda p, b: pack(p, b, [0, 0]),  # overlapping slots
        lambda p, b: pack(p, b, [0]),  # count mismatch
        lambda p, b: pack(p, b, [0, b.numel() - 1]),  # past the end
        lambda p, b: pack([p[0].t(), p[1]], b, [0, 64]),  # not contiguous
        lambda p, b: pack(p, b[::2], [0, 64]),  # strided buffer
    ],
)
def test_pack_rejects_bad_slots(bad: Callable[[list[Any], Any], None]) -> None:
    params = [torch.randn(4, 4, device=DEVICE), torch.randn(3, device=DEVICE)]
    buf = torch.zeros(256, dtype=torch.uint8, device=DEVICE)
    with pytest.raises(ValueError):
        bad(params, buf)
    assert bool((buf == 0).all())


def test_dispatch() -> None:
    assert triton_usable(DEVICE)
    assert not triton_usable(torch.device("meta"))
    with pytest.raises(ValueError, match="cannot run"):
        migrate_blocks([torch.zeros(4, 2, device="meta")], [(1, 2)], backend="triton")
