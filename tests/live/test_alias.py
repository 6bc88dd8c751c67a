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
    plan_slots,
    region_chunks,
)

LAYERS, BLOCKS, HEADS, BLOCK, HEAD = 5, 64, 2, 16, 32
BLOCK_BYTES = HEADS * BLOCK * 2 * HEAD * 4  # one layer's block, float32


def kv_caches(blocks: int = BLOCKS) -> tuple[Any, list[Any]]:
    per_layer = blocks * BLOCK_BYTES
    buffer = torch.zeros(LAYERS * per_layer, dtype=torch.int8)
    shape = (blocks, HEADS, BLOCK, 2 * HEAD)
    stride = (HEADS * BLOCK * 2 * HEAD, BLOCK * 2 * HEAD, 2 * HEAD, 1)
    caches = [
        buffer[i * per_layer : (i + 1) * per_layer].view(torch.float32).as_strided(shape, stride)
        for i in range(LAYERS)
    ]
    return buffer, caches


class Draft(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(512, 64)
        self.up = torch.nn.Linear(64, 176)
        self.down = torch.nn.Linear(176, 64, bias=False)
        self.head = torch.nn.Linear(64, 512, bias=False)
        self.head.weight = self.embed.weight  # tied: placed once

    def forward(self, ids: Any) -> Any:
        h = self.embed(ids)
        return self.head(h + self.down(torch.relu(self.up(h))))


IDS = torch.arange(0, 512, 7)


def _setup(region_blocks: int | None = None) -> tuple[Any, list[Any], Draft, AliasedParking, Any]:
    buffer, caches = kv_caches()
    draft = Draft()
    sizes = [p.numel() * p.element_size() for p in draft.parameters()]
    n = region_blocks or blocks_needed(sizes, [BLOCK_BYTES] * LAYERS, 64)
    with torch.no_grad():
        want = draft(IDS)
    parking = AliasedParking(draft, caches, range(BLOCKS - n, BLOCKS))
    return buffer, caches, draft, parking, want


def test_every_draft_parameter_lives_inside_the_kv_region() -> None:
    buffer, caches, draft, parking, want = _setup()
    base = buffer.untyped_storage().data_ptr()
    for name, p in draft.named_parameters():
        assert p.untyped_storage().data_ptr() == base, f"{name} has its own storage"
    assert parking.inside_region()
    # Nothing of the draft lies outside the region: the rest of every layer is untouched.
    region = parking.region
    assert region.stop == BLOCKS and len(region) < BLOCKS // 2
    for cache in caches:
        assert not cache[: region.start].any()
    assert parking.resident_bytes == sum(
        p.numel() * p.element_size() for p in draft.parameters()
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
    assert all(s.offset % 64 == 0 for s in slots)
    with pytest.raises(ValueError, match="fits in no region chunk"):
        plan_slots(sizes, [2 * BLOCK_BYTES] * LAYERS, 64)
    # Heads outside blocks (vLLM's LHBNC): a layer's region is no single chunk.
    heads_first = torch.zeros(HEADS, BLOCKS, BLOCK, 2 * HEAD).permute(1, 0, 2, 3)
    with pytest.raises(ValueError, match="not one contiguous chunk"):
        region_chunks([heads_first], range(60, 64))
