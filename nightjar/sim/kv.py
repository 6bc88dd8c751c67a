"""The KV block pool as the scheduler sees it: counts, not addresses.

Invariants: ``0 <= used <= total``; ``0 <= reclaim_pending``; the scheduler may
hand out ``free = total - used - reclaim_pending`` (never negative), so blocks
promised back to the draft are not handed out again while it waits for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class BlockPool:
    """``free`` is kept by every method that changes the counts (the step loop reads
    it several times a step); the counts change only through them."""

    total: int
    used: int = 0
    reclaim_pending: int = 0
    free: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.total < 1:
            raise ValueError(f"a KV pool needs at least one block, got {self.total}")
        self._count()

    def _count(self) -> None:
        self.free = max(0, self.total - self.used - self.reclaim_pending)

    def allocate(self, n: int) -> None:
        if n > self.free:
            raise RuntimeError(f"allocating {n} blocks with {self.free} free")
        self.used += n
        self._count()

    def release(self, n: int) -> None:
        if n > self.used:
            raise RuntimeError(f"releasing {n} blocks with {self.used} in use")
        self.used -= n
        self._count()

    def grow(self, n: int) -> None:
        """Blocks the draft's memory became (an offload completed)."""
        self.total += n
        self._count()

    def start_reclaim(self, n: int) -> None:
        """Stop handing out ``n`` blocks; they leave the pool once free (drain)."""
        self.reclaim_pending += n
        self._count()

    def try_finish_reclaim(self) -> bool:
        """Shrink the pool once the pending blocks are all free; True when done."""
        if self.reclaim_pending == 0:
            return True
        if self.total - self.used < self.reclaim_pending:
            return False
        self.total -= self.reclaim_pending
        self.reclaim_pending = 0
        self._count()
        return True

    def reclaim_shortfall(self) -> int:
        """Blocks still in use that a pending reclaim is waiting for."""
        return max(0, self.reclaim_pending - (self.total - self.used))
