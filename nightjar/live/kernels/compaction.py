"""Planning a KV block migration: which blocks move where, and the block-table remap.

A reload needs a fixed range of block ids (the *region*, where the draft's weights
go) to be empty. Instead of waiting for the requests holding blocks in it to finish,
each used block in the region is copied to a free block outside it
(:func:`plan_compaction`), the copies run on the device
(:func:`nightjar.live.kernels.migrate_blocks`), and every block table that named
an old id is rewritten (:func:`remap_block_ids`, :func:`remap_block_table`).

A plan is a list of ``(src, dst)`` pairs. Invariants (:func:`check_pairs`): every
id appears at most once as a source and at most once as a destination, and no id is
both, so all copies of a plan can run in parallel, in any order, with the same
result as copying ``src`` to ``dst`` one pair at a time. A chain (``a -> b`` then
``b -> c``) has no such order-free meaning and is rejected.

Only :func:`remap_block_table` touches torch (imported there), so the planner can
run in the scheduler process with no device work.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

Pair = tuple[int, int]


def check_pairs(pairs: Sequence[Pair], num_blocks: int | None = None) -> None:
    """Raise ``ValueError`` unless ``pairs`` is a parallel-safe migration plan."""
    srcs: set[int] = set()
    dsts: set[int] = set()
    for src, dst in pairs:
        for b in (src, dst):
            if b < 0 or (num_blocks is not None and b >= num_blocks):
                raise ValueError(f"block id {b} outside the pool of {num_blocks} blocks")
        if src in srcs:
            raise ValueError(f"block {src} is moved twice")
        if dst in dsts:
            raise ValueError(f"block {dst} is written twice")
        srcs.add(src)
        dsts.add(dst)
    both = srcs & dsts
    if both:
        # A block that is read by one pair and written by another makes the result
        # depend on the order of the copies; plan_compaction never produces this.
        raise ValueError(
            f"block {min(both)} is both a source and a destination (chained move); "
            "plan the migration so sources and destinations are disjoint"
        )


def plan_compaction(region: range, used: Iterable[int], free: Iterable[int]) -> list[Pair]:
    """Pairs that move every used block inside ``region`` to a free block outside it.

    ``used``: ids held by requests (ids outside the region are ignored).
    ``free``: ids nobody holds (ids inside the region are ignored: the region
    is being emptied). Used blocks are taken in ascending id order and matched with
    the lowest free ids, so the plan is deterministic. Raises ``ValueError`` when
    there are fewer free blocks outside the region than used blocks inside it (the
    caller then has to wait for blocks to drain, or preempt).
    """
    used_set, free_set = set(used), set(free)
    overlap = used_set & free_set
    if overlap:
        raise ValueError(f"block {min(overlap)} is listed as both used and free")
    movers = sorted(b for b in used_set if b in region)
    targets = sorted(b for b in free_set if b not in region)
    if len(targets) < len(movers):
        raise ValueError(
            f"{len(movers)} used blocks in the region but only {len(targets)} free "
            "blocks outside it"
        )
    pairs = list(zip(movers, targets, strict=False))
    check_pairs(pairs)
    return pairs


def remap_block_ids(ids: Sequence[int], pairs: Sequence[Pair]) -> list[int]:
    """``ids`` with every moved block replaced by its destination."""
    move = dict(pairs)
    return [move.get(b, b) for b in ids]


def remap_block_table(table: torch.Tensor, pairs: Sequence[Pair]) -> torch.Tensor:
    """An integer block table (any shape) with moved ids replaced, as a new tensor.

    Entries that are not block ids of the pool (vLLM pads tables with 0, and a
    padding 0 can never be a source: block 0 is vLLM's null block) pass through.
    """
    import torch

    if not pairs:
        return table.clone()
    src = torch.tensor([s for s, _ in pairs], dtype=table.dtype, device=table.device)
    dst = torch.tensor([d for _, d in pairs], dtype=table.dtype, device=table.device)
    # One comparison matrix instead of a lookup array sized by the largest id: plans
    # are small (at most the draft's footprint in blocks).
    hit = table.unsqueeze(-1) == src
    found = hit.any(dim=-1)
    new = (hit.to(table.dtype) * dst).sum(dim=-1).to(table.dtype)
    return torch.where(found, new, table)
