"""The running batch as parallel numpy arrays, kept in admission order.

Order matters: preemption takes the newest request first (the tail), as vLLM does.
Per-request history that outlives a stay in the batch (generated tokens, times,
counters) lives in :class:`sim.ledger.Ledger`, indexed by request id.
"""

from __future__ import annotations

import numpy as np

_EMPTY = np.zeros(0, dtype=np.int64)


class RunningBatch:
    def __init__(self) -> None:
        self.rid = _EMPTY  # request ids (indices into the trace)
        self.ctx = _EMPTY  # tokens in the target's KV cache
        self.blocks = _EMPTY  # KV blocks allocated
        self.lag = _EMPTY  # tokens the draft's KV cache is behind by
        # Prompt tokens still to prefill (chunked prefill); 0 for a decoding request.
        # Decoding requests always precede prefilling ones: a prompt is only
        # admitted after every running request was scheduled (decodes first).
        self.todo = _EMPTY

    def __len__(self) -> int:
        return int(self.rid.shape[0])

    def append(
        self, rid: np.ndarray, ctx: np.ndarray, blocks: np.ndarray, lag: np.ndarray,
        todo: np.ndarray,
    ) -> None:
        self.rid = np.concatenate((self.rid, rid))
        self.ctx = np.concatenate((self.ctx, ctx))
        self.blocks = np.concatenate((self.blocks, blocks))
        self.lag = np.concatenate((self.lag, lag))
        self.todo = np.concatenate((self.todo, todo))

    def decoding(self) -> int:
        """How many requests (a prefix of the batch) have finished their prefill."""
        n = len(self)
        if n == 0 or self.todo[-1] == 0:
            return n
        return int(np.argmax(self.todo > 0))

    def keep(self, mask: np.ndarray) -> None:
        """Drop the requests where ``mask`` is false, preserving order."""
        self.rid = self.rid[mask]
        self.ctx = self.ctx[mask]
        self.blocks = self.blocks[mask]
        self.lag = self.lag[mask]
        self.todo = self.todo[mask]

    def truncate(self, n: int) -> None:
        """Keep the oldest ``n`` requests."""
        self.rid = self.rid[:n]
        self.ctx = self.ctx[:n]
        self.blocks = self.blocks[:n]
        self.lag = self.lag[:n]
        self.todo = self.todo[:n]
