"""KV "ballast": blocks withheld from vLLM's block pool while the draft is resident.

The KV pool is sized for the draft-offloaded case. While the draft is resident the
blocks its bytes stand for are taken out of the scheduler's free queue (allocated
to nobody), so the scheduler really has fewer blocks to admit and grow requests
with; when the draft leaves they are freed into the pool; before it returns they
are taken back, as they become free (drain), never by evicting a running request.

Invariant: ``0 <= held <= target``; ``held == target`` whenever the draft is
resident (the reload completes only once the drain is done).
"""

from __future__ import annotations

from typing import Any


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
        self._held: list[Any] = []

    @property
    def held(self) -> int:
        return len(self._held)

    def fill(self, limit: int | None = None) -> int:
        """Take up to ``limit`` free blocks towards ``target``; returns how many were taken.

        Only blocks that are free right now are taken, so running requests keep
        theirs; the caller repeats this each step until :attr:`full`.
        """
        want = self.target - self.held
        if limit is not None:
            want = min(want, limit)
        take = min(want, self._pool.get_num_free_blocks())
        if take > 0:
            self._held.extend(self._pool.get_new_blocks(take))
        return max(int(take), 0)

    @property
    def full(self) -> bool:
        return self.held >= self.target

    def release(self) -> int:
        """Give every held block back to the scheduler; returns how many."""
        n = self.held
        if n:
            self._pool.free_blocks(self._held)
            self._held = []
        return n
