"""KV "ballast": the block-id region withheld from vLLM's block pool while the draft is resident.

The KV pool is sized for the draft-offloaded case. While the draft is resident the
blocks its bytes stand for are taken out of the scheduler's free queue (allocated
to nobody), so the scheduler really has fewer blocks to admit and grow requests
with; when the draft leaves they are freed into the pool. The ballast is a fixed
*region* of block ids, the last ``target`` ones (where the draft's weights would
live), so getting it back before a reload means emptying exactly that region:

- drain: :meth:`Ballast.fill` takes region blocks as they become free, never by
  evicting a running request;
- migrate: :meth:`Ballast.compact` moves every used region block to a free block
  outside the region in the scheduler's books (block pool and every request's block
  list) and returns the ``(src, dst)`` copies the worker must make before the next
  forward pass reads the moved blocks; the emptied sources join the ballast.

Invariants: ``0 <= held <= target``; every held block is in the region with
``ref_cnt == 1`` and outside the free queue; ``held == target`` whenever the draft
is resident (the reload completes only once the region is empty of requests).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nightjar.live.kernels.compaction import Pair, plan_compaction


class Ballast:
    def __init__(self, block_pool: Any, target: int) -> None:
        total = block_pool.get_num_free_blocks()
        if target >= total:
            # A pool with no room left for requests would dead-lock the engine.
            raise ValueError(
                f"draft footprint of {target} KV blocks leaves no room in a pool of {total}"
            )
        self._pool = block_pool
        self.target = target
        # Block 0 is vLLM's null block; target < free blocks keeps it out of the region.
        n = int(block_pool.num_gpu_blocks)
        self.region = range(n - target, n)
        self._held: dict[int, Any] = {}

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def full(self) -> bool:
        return self.held >= self.target

    def fill(self) -> int:
        """Take every free block of the region not held yet; returns how many were taken.

        Only blocks that are free right now are taken, so running requests keep
        theirs; in drain mode the caller repeats this each step until :attr:`full`.
        """
        pool = self._pool
        taken = []
        for block_id in self.region:
            block = pool.blocks[block_id]
            # ref_cnt 0 and linked into the free queue: nobody holds it.
            if block_id in self._held or block.ref_cnt != 0 or block.prev_free_block is None:
                continue
            pool.free_block_queue.remove(block)
            taken.append(block)
        self._claim(taken)
        return len(taken)

    def take(self, blocks: Iterable[Any]) -> None:
        """Hold region blocks that nobody references and that are not in the free queue."""
        blocks = list(blocks)
        for block in blocks:
            if block.block_id not in self.region or block.ref_cnt != 0:
                raise ValueError(f"block {block.block_id} is not a free region block")
        self._claim(blocks)

    def _claim(self, blocks: list[Any]) -> None:
        pool = self._pool
        if blocks and getattr(pool, "_reuse_watchers", None):
            pool._notify_reuse(blocks)  # readers of unpinned blocks must stop
        for block in blocks:
            # A prefix-cache hit on a withheld block would hand it to a request.
            pool._maybe_evict_cached_block(block)
            block.ref_cnt += 1
            self._held[block.block_id] = block

    def release(self) -> int:
        """Give every held block back to the scheduler; returns how many."""
        n = self.held
        if n:
            self._pool.free_blocks(list(self._held.values()))
            self._held = {}
        return n

    def compact(self, block_lists: list[list[Any]]) -> list[Pair]:
        """Empty the region by moving its used blocks out; returns the copies to make.

        ``block_lists``: every request's block list of every KV-cache group using
        this pool (a shared prefix block appears in several). Returns ``[]`` and
        changes nothing when the region holds blocks no list accounts for (e.g.
        blocks vLLM keeps for a pending copy-on-write) or when there are too few
        free blocks outside the region; the caller then keeps draining.
        """
        self.fill()
        pool = self._pool
        used = {
            b.block_id: b
            for blocks in block_lists
            for b in blocks
            if b.block_id in self.region and not b.is_null
        }
        if not used or len(used) + self.held != self.target:
            return []
        # Destinations in eviction order, as vLLM's own allocation would pick them.
        free = []
        for block in pool.free_block_queue.get_all_free_blocks():
            if block.block_id not in self.region:
                free.append(block.block_id)
                if len(free) == len(used):
                    break
        try:
            pairs: list[Pair] = plan_compaction(self.region, used, free)
        except ValueError:
            return []
        moved: dict[int, Any] = {}
        for s, d in pairs:
            src, dst = pool.blocks[s], pool.blocks[d]
            pool.free_block_queue.remove(dst)
            pool._maybe_evict_cached_block(dst)
            if src.block_hash is not None or s in pool.cached_block_hashes_by_block:
                # The cached prefix now lives at dst; without move_block_hashes
                # (other vLLM releases) the entry is dropped instead.
                if hasattr(pool, "move_block_hashes"):
                    pool.move_block_hashes(src, dst)
                else:
                    pool._maybe_evict_cached_block(src)
            dst.ref_cnt, src.ref_cnt = src.ref_cnt, 0
            moved[s] = dst
        for blocks in block_lists:
            for i, b in enumerate(blocks):
                new = moved.get(b.block_id)
                if new is not None and b is pool.blocks[b.block_id]:
                    blocks[i] = new
        self.take(pool.blocks[s] for s, _ in pairs)
        return pairs
