"""Draft weights aliased into the KV ballast region (nightjar.live.residency.alias).

The KV caches are built the way vLLM 0.32.0's CPU backend builds them (measured,
docs/kernels.md): one int8 buffer, each layer an ``as_strided`` float32 view of
shape ``[num_blocks, kv_heads, block_size, 2 * head_size]``, blocks outermost. The
draft is a small torch module whose forward reads its parameters directly, as the
plain ``F.linear`` path does."""

from __future__ import annotations

from typing import Any

import pytest

NEEDS_VLLM = False  # torch is enough (conftest reads this)

torch = pytest.importorskip("torch", reason="torch is not installed (live venv only)")

from nightjar.live.residency.alias import (  # noqa: E402
    AliasedParking,
    WeightCorruption,
    blocks_needed,
    checksum,
    chunked_embedding,
    chunked_linear,
    plan_slots,
    region_chunks,
    splittable_rows,
)

LAYERS, BLOCKS, HEADS, BLOCK, HEAD = 5, 64, 2, 16, 32
BLOCK_BYTES = HEADS * BLOCK * 2 * HEAD * 4  # one layer's block, float32


def kv_caches(blocks: int = BLOCKS, device: str = "cpu") -> tuple[Any, list[Any]]:
    per_layer = blocks * BLOCK_BYTES
    buffer = torch.zeros(LAYERS * per_layer, dtype=torch.int8, device=device)
    shape = (blocks, HEADS, BLOCK, 2 * HEAD)
    stride = (HEADS * BLOCK * 2 * HEAD, BLOCK * 2 * HEAD, 2 * HEAD, 1)
    caches = [
        buffer[i * per_layer : (i + 1) * per_layer].view(torch.float32).as_strided(shape, stride)
        for i in range(LAYERS)
    ]
    return buffer, caches


class Draft(torch.nn.Module):
    def __init__(self, vocab: int = 512) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(vocab, 64)
        self.up = torch.nn.Linear(64, 176)
        self.down = torch.nn.Linear(176, 64, bias=False)
        self.head = torch.nn.Linear(64, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied: placed once

    def forward(self, ids: Any) -> Any:
        h = self.embed(ids)
        return self.head(h + self.down(torch.relu(self.up(h))))


IDS = torch.arange(0, 512, 7)


def _needed(draft: Draft) -> int:
    params = list(draft.parameters())
    sizes = [p.numel() * p.element_size() for p in params]
    rows = [splittable_rows(p) for p in params]
    return blocks_needed(sizes, [BLOCK_BYTES] * LAYERS, 64, rows)


def _setup(
    vocab: int = 512, device: str = "cpu"
) -> tuple[Any, list[Any], Draft, AliasedParking, Any]:
    buffer, caches = kv_caches(device=device)
    draft = Draft(vocab).to(device)
    n = _needed(draft)
    ids = torch.arange(0, vocab, 7, device=device)
    with torch.no_grad():
        want = draft(ids)
    parking = AliasedParking(draft, caches, range(BLOCKS - n, BLOCKS))
    return buffer, caches, draft, parking, want


def test_every_draft_parameter_lives_inside_the_kv_region() -> None:
    buffer, caches, draft, parking, want = _setup()
    base = buffer.untyped_storage().data_ptr()
    for name, p in draft.named_parameters():
        views = [v for _, v in parking.pieces(p)] if parking.is_split(p) else [p]
        for v in views:
            assert v.untyped_storage().data_ptr() == base, f"{name} has its own storage"
    assert parking.inside_region()
    # Nothing of the draft lies outside the region: the rest of every layer is untouched.
    region = parking.region
    assert region.stop == BLOCKS and len(region) < BLOCKS // 2
    for cache in caches:
        assert not cache[: region.start].any()
    assert parking.resident_bytes == sum(
        p.numel() * p.element_size() for p in Draft().parameters()
    )
    with torch.no_grad():
        assert torch.equal(draft(IDS), want)


def test_offload_and_reload_cycles_are_bit_exact_while_kv_reuses_the_region() -> None:
    buffer, _, draft, parking, want = _setup()
    gen = torch.Generator().manual_seed(1)
    for _ in range(3):
        moved = parking.park()
        assert moved > 0 and parking.parked
        assert all(p.numel() == 0 for p in draft.parameters())
        # The released region now holds requests' KV.
        buffer.copy_(torch.randint(-128, 128, buffer.shape, generator=gen, dtype=torch.int8))
        assert parking.restore() == moved
        assert parking.inside_region()
        with torch.no_grad():
            assert torch.equal(draft(IDS), want)


# A vocabulary whose embedding (tied with the LM head, 1 MiB) is 5x one layer's
# region chunk: it must be split by rows over several layers' chunks.
BIG = 4096
BIG_IDS = torch.arange(0, BIG, 7)


def test_a_tensor_larger_than_a_chunk_is_split_and_the_region_is_its_bytes() -> None:
    buffer, caches, draft, parking, want = _setup(BIG)
    region = parking.region
    draft_bytes = parking.resident_bytes
    share = -(-draft_bytes // (LAYERS * BLOCK_BYTES))
    assert parking.split_names == ["embed.weight"]
    assert len(parking.pieces(draft.embed.weight)) >= 5
    # The region is the draft's bytes plus alignment: at most one block more.
    assert len(region) <= share + 1, (len(region), share)
    # Whole placement would need a chunk holding all 1 MiB: 4x the blocks.
    sizes = [p.numel() * p.element_size() for p in Draft(BIG).parameters()]
    assert blocks_needed(sizes, [BLOCK_BYTES] * LAYERS, 64) >= 4 * share
    assert parking.inside_region()
    base = buffer.untyped_storage().data_ptr()
    for _, piece in parking.pieces(draft.embed.weight):
        assert piece.untyped_storage().data_ptr() == base
    for cache in caches:
        assert not cache[: region.start].any()
    with torch.no_grad():
        assert torch.equal(draft(BIG_IDS), want)


def test_split_pieces_recombine_bit_exactly() -> None:
    torch.manual_seed(3)
    w = torch.randn(BIG, 64)
    bias = torch.randn(BIG)
    before = Draft(BIG)
    whole = before.embed.weight.detach().clone()
    _, _, draft, parking, _ = _setup(BIG)
    pieces = parking.pieces(draft.embed.weight)
    assert [r for r, _ in pieces] == sorted(r for r, _ in pieces)
    assert torch.equal(torch.cat([v for _, v in pieces]), whole)
    # The chunked lookup and GEMM on arbitrary pieces of a matrix equal the whole ones.
    # Pieces of multiples of PIECE_ROWS rows, the last one what is left.
    cuts = [(0, w[:1008]), (1008, w[1008:1024]), (1024, w[1024:3008]), (3008, w[3008:])]
    ids = torch.tensor([[0, 1007, 1008, 1023, 1024], [3008, BIG - 1, 5, 3007, 0]])
    assert torch.equal(chunked_embedding(ids, cuts), torch.nn.functional.embedding(ids, w))
    # The GEMM per piece: bitwise equal on this project's CPU build (MKL, pieces of
    # 16k rows); other BLAS builds differ in the last bits at some M (measured on
    # the GPU machine's CPU at M = 1, and with cuBLAS in float32), so closeness here
    # and experiments/alias_chunked.py reports bitwise equality per platform.
    for m in (1, 4, 16, 64):
        x = torch.randn(m, 64)
        full = torch.nn.functional.linear(x, w, bias)
        torch.testing.assert_close(chunked_linear(x, cuts, bias), full, rtol=1e-6, atol=1e-5)


def test_split_cycles_are_bit_exact_and_a_corrupted_piece_is_caught() -> None:
    buffer, _, draft, parking, want = _setup(BIG)
    gen = torch.Generator().manual_seed(2)
    total = sum(p.numel() * 4 for p in draft.parameters()) + BIG * 64 * 4  # embed is empty
    assert parking.resident_bytes == total
    for _ in range(2):
        moved = parking.park()
        assert moved == total
        buffer.copy_(torch.randint(-128, 128, buffer.shape, generator=gen, dtype=torch.int8))
        assert parking.restore() == moved
        with torch.no_grad():
            assert torch.equal(draft(BIG_IDS), want)
    # One element of the last piece (another layer's chunk) changes while resident.
    _, last = parking.pieces(draft.embed.weight)[-1]
    last[-1, -1] += 1.0
    with pytest.raises(WeightCorruption, match=r"embed\.weight changed while resident"):
        parking.park()
    with pytest.raises(WeightCorruption, match="on its way back"):
        parking.restore()
    assert parking.parked
    with pytest.raises(RuntimeError, match="parked"):
        parking.pieces(draft.embed.weight)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_split_weights_on_cuda_are_exact_checked_and_capturable() -> None:
    """On CUDA (weights used in place): pinned parking, device checksums, graph capture."""
    buffer, _, draft, parking, want = _setup(BIG, "cuda")
    ids = BIG_IDS.cuda()
    assert parking.split_names == ["embed.weight"] and parking.inside_region()
    with torch.no_grad():
        assert torch.equal(draft(ids), want)
        for _ in range(2):
            parking.park()
            assert next(iter(parking._host.values())).is_pinned()
            buffer.random_(-128, 128)
            parking.restore()
            assert torch.equal(draft(ids), want)
        # The chunked paths have static shapes: a CUDA graph replays them.
        static = ids.clone()
        draft(static)
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = draft(static)
        graph.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, want)
    _, last = parking.pieces(draft.embed.weight)[-1]
    last[0, 0] += 1.0
    with pytest.raises(WeightCorruption, match="while resident"):
        parking.park()


def test_a_block_overwritten_while_resident_is_caught_at_offload_and_never_served() -> None:
    _, caches, draft, parking, _ = _setup()
    p = draft.up.weight
    # Overwrite the whole region block holding ``up.weight`` in its layer.
    layer = next(i for i, c in enumerate(caches) if c.untyped_storage().data_ptr() and
                 c.data_ptr() <= p.data_ptr() < c.data_ptr() + BLOCKS * BLOCK_BYTES)
    block = (p.data_ptr() - caches[layer].data_ptr()) // BLOCK_BYTES
    caches[layer][block].fill_(1.5)
    with pytest.raises(WeightCorruption, match="while resident"):
        parking.park()
    # Parked regardless, and the bad copy can never come back.
    assert parking.parked and all(q.numel() == 0 for q in draft.parameters())
    with pytest.raises(WeightCorruption, match="on its way back"):
        parking.restore()
    assert parking.parked and all(q.numel() == 0 for q in draft.parameters())


def test_a_host_copy_corrupted_while_parked_fails_the_reload() -> None:
    parking = _setup()[3]
    parking.park()
    host = next(iter(parking._host.values()))
    host.view(-1)[0] += 1.0
    with pytest.raises(WeightCorruption):
        parking.restore()
    assert parking.parked


def test_checksum_sees_one_byte_and_a_swap() -> None:
    t = torch.arange(64, dtype=torch.uint8)
    a = checksum(t)
    u = t.clone()
    u[5] += 1
    assert checksum(u) != a
    v = t.clone()
    v[3], v[9] = t[9], t[3]
    assert checksum(v)[0] == a[0] and checksum(v) != a


def test_layout_planning() -> None:
    # A tensor larger than one layer's chunk needs more blocks than the bytes' share.
    sizes = [3 * BLOCK_BYTES, 100, 100]
    n = blocks_needed(sizes, [BLOCK_BYTES] * LAYERS, 64)
    assert n == 3
    slots = plan_slots(sizes, [n * BLOCK_BYTES] * LAYERS, 64)
    assert all(len(s) == 1 and s[0].offset % 64 == 0 for s in slots)
    with pytest.raises(ValueError, match="fits in no region chunk"):
        plan_slots(sizes, [2 * BLOCK_BYTES] * LAYERS, 64)
    # Split by rows (a row of 256 bytes): the bytes' share of blocks is enough.
    rows = [256, 0, 0]
    assert blocks_needed(sizes, [BLOCK_BYTES] * LAYERS, 64, rows) == 1
    slots = plan_slots(sizes, [BLOCK_BYTES] * LAYERS, 64, rows)
    assert [s.chunk for s in slots[0]] == [0, 1, 2]
    assert [s.row for s in slots[0]] == [0, 32, 64]
    # Pieces start at multiples of PIECE_ROWS rows: a 100-row chunk takes 96.
    odd = plan_slots([40 * 100], [100 * 40 + 60, 40 * 100], 64, [40])[0]
    assert [(s.row, s.nbytes // 40) for s in odd] == [(0, 100)]
    odd = plan_slots([40 * 200], [100 * 40, 150 * 40], 64, [40])[0]
    assert [(s.row, s.nbytes // 40) for s in odd] == [(0, 96), (96, 104)]
    assert sum(s.nbytes for s in slots[0]) == sizes[0]
    assert all(len(s) == 1 and s[0].offset % 64 == 0 for s in slots[1:])
    with pytest.raises(ValueError, match="even split by rows"):
        plan_slots(sizes, [BLOCK_BYTES] * 2, 64, rows)
    # Heads outside blocks (vLLM's LHBNC): a layer's region is no single chunk.
    heads_first = torch.zeros(HEADS, BLOCKS, BLOCK, 2 * HEAD).permute(1, 0, 2, 3)
    with pytest.raises(ValueError, match="not one contiguous chunk"):
        region_chunks([heads_first], range(60, 64))
