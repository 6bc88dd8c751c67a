"""The bound's recorder buffers what it needs of up to ``bound.CHUNK`` decode steps
here (:mod:`nightjar.sim.yardstick`), then prices them together.

Almost nothing here is per request: the recorder keeps its sums over the decoding
requests as they join and leave, so a step stores a few scalars and one row per
table, plus the few requests within ``gamma_max`` tokens of their end. Scalars go to
lists (an append costs tens of nanoseconds, a write into a numpy slot hundreds); the
rows go to preallocated tables, reused chunk after chunk. Invariant: every per-step
list and the first ``n`` rows of every table hold one entry per step; the ``near_*``
lists hold one entry per such request, ``near_step`` naming its step.
"""

from __future__ import annotations

import numpy as np


class Chunk:
    """Per step: ``batch`` (decoding requests), ``t`` (its decode-step index),
    ``top`` (the largest gamma that ran), ``ran`` (the gamma every request ran, or -1
    where they ran different lengths), ``played`` (for those, the fixed-point tokens
    their lengths were expected to emit, less one per request), ``fixed`` (the
    target's prompt work, priced whatever the gamma), ``diff`` (each gamma's price less
    that prompt work, a cached array), ``overhead`` (seconds on top, e.g. a draft
    transfer) and ``own`` (the step as it ran, or NaN where the requests ran
    different lengths); ``near_*``, the requests with at most ``gamma_max`` tokens
    left (their step, id and minus what they had left), whose drafts past their end
    are taken off ``reach`` when the chunk is priced. Tables: ``reach`` (per gamma,
    the recorder's fixed-point sum of the tokens beyond one per request), and in skip
    mode ``rings``, its two rings (decode starts, prompt chunks:
    :class:`nightjar.sim.yardstick.Recorder`) as the step saw them."""

    def __init__(self, size: int, gamma_max: int, window: int, skip: bool) -> None:
        self.n = 0
        self.reach = np.zeros((size, gamma_max + 1), dtype=np.int64)
        rings = size if skip else 0
        self.rings = np.zeros((rings, 2, window), dtype=np.int64)  # starts, prompts
        self.clear()

    def clear(self) -> None:
        self.n = 0
        self.varied = False  # some step ran other than gamma_max for every request
        self.batch: list[int] = []
        self.t: list[int] = []
        self.top: list[int] = []
        self.ran: list[int] = []
        self.played: list[int] = []
        self.fixed: list[float] = []
        self.diff: list[np.ndarray] = []
        self.overhead: list[float] = []
        self.own: list[float] = []
        # The requests with at most gamma_max tokens left: step, request id, -left.
        self.near_step: list[int] = []
        self.near_rid: list[int] = []
        self.near_left: list[int] = []

    def prices(self) -> np.ndarray:
        """Per step and gamma: its price less the prompt work, the gamma that ran at
        what the step cost (same arithmetic as pricing each step alone)."""
        out = np.vstack(self.diff)
        out += np.asarray(self.overhead)[:, None]
        own = np.asarray(self.own)
        rows = np.flatnonzero(~np.isnan(own))
        out[rows, np.asarray(self.top)[rows]] = own[rows]
        return out
