"""The bound's recorder buffers the raw facts of up to ``bound.CHUNK`` decode steps here
(:mod:`nightjar.sim.yardstick`), then turns them into arrays at once.

A step appends Python scalars and references to arrays the engine made for it anyway
(its request ids, what each had left): list appends cost a few tens of nanoseconds,
where writing into preallocated numpy slices costs a few hundred each. Invariant:
every per-step list holds ``n`` entries, and the per-request pieces of step i hold
``batch[i]`` values each.
"""

from __future__ import annotations

import numpy as np


class Chunk:
    """Per step: ``batch`` (decoding requests), ``top`` (the largest gamma that ran),
    ``fixed`` (the target's prompt work, priced whatever the gamma), ``diff`` (each
    gamma's price less that prompt work, a cached array) and ``overhead`` (seconds
    on top, e.g. a draft transfer), ``own`` (the step as it ran, for the gamma that
    ran, or NaN where the requests ran different lengths). Per request of each step:
    ``rid``, ``remaining`` (tokens it had left), ``gamma`` (an int for the whole step,
    or one per request), ``speculates`` (None: every request may), and in skip mode
    ``start``, ``key``, ``prompt`` (see :class:`nightjar.sim.yardstick.Recorder`)."""

    def __init__(self) -> None:
        self.n = 0
        self.varied = False  # some step ran other than gamma_max for every request
        self.restricted = False  # some step had requests that may not speculate
        self.batch: list[int] = []
        self.top: list[int] = []
        self.fixed: list[float] = []
        self.diff: list[np.ndarray] = []
        self.overhead: list[float] = []
        self.own: list[float] = []
        self.rid: list[np.ndarray] = []
        self.remaining: list[np.ndarray] = []
        self.gamma: list[np.ndarray | int] = []
        self.speculates: list[np.ndarray | None] = []
        self.start: list[np.ndarray] = []
        self.key: list[np.ndarray] = []
        self.prompt: list[np.ndarray] = []

    def prices(self) -> np.ndarray:
        """Per step and gamma: its price less the prompt work, the gamma that ran at
        what the step cost (same arithmetic as pricing each step alone)."""
        out = np.vstack(self.diff)
        out += np.asarray(self.overhead)[:, None]
        own = np.asarray(self.own)
        rows = np.flatnonzero(~np.isnan(own))
        out[rows, np.asarray(self.top)[rows]] = own[rows]
        return out

    def offsets(self) -> np.ndarray:
        out = np.zeros(self.n + 1, dtype=np.int64)
        np.cumsum(self.batch, out=out[1:])
        return out

    def gammas(self) -> np.ndarray:
        return np.concatenate([
            np.full(b, g, dtype=np.int64) if isinstance(g, int) else g
            for b, g in zip(self.batch, self.gamma, strict=True)
        ])

    def speculating(self) -> np.ndarray:
        return np.concatenate([
            np.ones(b, dtype=np.bool_) if s is None else s
            for b, s in zip(self.batch, self.speculates, strict=True)
        ])
