"""The running batch: one preallocated int64 table, columns in admission order.

Order matters: preemption takes the newest request first (the tail), as vLLM does.
Row ``f`` of :attr:`RunningBatch.state` is field ``f`` (``RID``, ``CTX``, ...) of every
running request, so one fancy index moves a whole request when the batch is
compacted, and every per-step update is an in-place operation on a row's prefix
(``state[CTX, :n]``): no array is built or concatenated per step. Per-request history
that outlives a stay in the batch lives in :class:`nightjar.sim.ledger.Ledger`,
indexed by request id; the running copies of its counters (``NEG_LEFT``,
``DRAFTED``, ``ACCEPTED``) are written back when a request leaves the batch (it finishes or is
preempted).

Invariant: the ``n_decode`` requests that finished their prefill are a prefix of
the batch (``TODO`` is 0 there and > 0 after): a prompt is only admitted after every
running request was scheduled, and a partial prefill gets the next chunk before
anything behind it does.
"""

from __future__ import annotations

import numpy as np

# Rows of RunningBatch.state.
RID = 0  # request id (index into the trace)
CTX = 1  # tokens in the target's KV cache
# generated - output: minus the output tokens still to generate (<= 0 while running).
# Next to CTX because a decode step adds the same emitted tokens to both rows.
NEG_LEFT = 2
BLOCKS = 3  # KV blocks allocated
LAG = 4  # tokens the draft's KV cache is behind by
TODO = 5  # prompt tokens still to prefill (chunked prefill); 0 once decoding
DRAFTED = 6  # draft tokens proposed over the request's life (ledger copy)
ACCEPTED = 7  # of which accepted (ledger copy)
FIELDS = 8


class RunningBatch:
    def __init__(self, capacity: int = 256) -> None:
        self.state = np.zeros((FIELDS, max(capacity, 1)), dtype=np.int64)
        # log(acceptance rate) of each running request (the geometric draw's divisor).
        self.log_alpha = np.zeros(max(capacity, 1))
        self.n = 0  # running requests
        self.n_decode = 0  # of which decoding (a prefix)

    def __len__(self) -> int:
        return self.n

    # Views of the running prefix, for readers outside the step loop.
    @property
    def rid(self) -> np.ndarray:
        return self.state[RID, : self.n]

    @property
    def ctx(self) -> np.ndarray:
        return self.state[CTX, : self.n]

    @property
    def blocks(self) -> np.ndarray:
        return self.state[BLOCKS, : self.n]

    @property
    def lag(self) -> np.ndarray:
        return self.state[LAG, : self.n]

    @property
    def todo(self) -> np.ndarray:
        return self.state[TODO, : self.n]

    def decoding(self) -> int:
        """How many requests (a prefix of the batch) have finished their prefill."""
        return self.n_decode

    def append(self, columns: np.ndarray, log_alpha: np.ndarray) -> None:
        """Add requests at the tail: ``columns`` is ``FIELDS x k``, prefilling ones."""
        k = columns.shape[1]
        end = self.n + k
        if end > self.state.shape[1]:  # the engine sizes it below its cap: grow
            grown = max(end, 2 * self.state.shape[1])
            state = np.zeros((FIELDS, grown), dtype=np.int64)
            state[:, : self.n] = self.state[:, : self.n]
            log_a = np.zeros(grown)
            log_a[: self.n] = self.log_alpha[: self.n]
            self.state, self.log_alpha = state, log_a
        self.state[:, self.n : end] = columns
        self.log_alpha[self.n : end] = log_alpha
        self.n = end

    def append_one(self, column: tuple[int, ...], log_alpha: float) -> None:
        """Add one prefilling request at the tail (``column``: its ``FIELDS`` values)."""
        if self.n == self.state.shape[1]:
            self.append(np.array(column, dtype=np.int64)[:, None], np.array([log_alpha]))
            return
        self.state[:, self.n] = column
        self.log_alpha[self.n] = log_alpha
        self.n += 1

    def keep(self, mask: np.ndarray) -> None:
        """Drop the requests where ``mask`` (over the running prefix) is false, in order."""
        n = self.n
        kept = int(np.count_nonzero(mask))
        self.n_decode = int(np.count_nonzero(mask[: self.n_decode]))
        self.state[:, :kept] = self.state[:, :n][:, mask]
        self.log_alpha[:kept] = self.log_alpha[:n][mask]
        self.n = kept

    def remove(self, i: int) -> None:
        """Drop request ``i``, keeping the order (the tail moves up one)."""
        n = self.n
        if i < n - 1:  # overlapping slices: numpy copies through a buffer
            self.state[:, i : n - 1] = self.state[:, i + 1 : n]
            self.log_alpha[i : n - 1] = self.log_alpha[i + 1 : n]
        self.n = n - 1
        if i < self.n_decode:
            self.n_decode -= 1

    def pop(self) -> np.ndarray:
        """Remove the newest request; returns its column (a copy)."""
        self.n -= 1
        if self.n_decode > self.n:
            self.n_decode = self.n
        return self.state[:, self.n].copy()
