"""The bound's dynamic program over gamma (see :mod:`nightjar.sim.yardstick`, which
records a run and streams it here chunk by chunk), and the same program over an
explicit trajectory.

Invariant: every cost the program walks carries the same positive factor (the run's
expected tokens, divided out at the end), so the schedule it finds is the one the
token-weighted per-token latency would pick.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

# Longest gamma-0 stretch the program tells apart; longer ones are charged as this
# long, which undercharges their rebuild (the bound stays a bound, a little looser).
MAX_STRETCH = 128
# Steps priced together (numpy over the block, not per step).
CHUNK = 1024


@dataclass
class Trajectory:
    """What the program needs per decode step, as lists (:func:`bound_ptl_s` over an
    explicit trajectory; the recorder streams the same quantities chunk by chunk)."""

    batch: list[int] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)  # what the run's step cost
    played: list[float] = field(default_factory=list)  # expected tokens of its choice
    # Seconds a gamma choice costs (decode, draft, the draft's share of prompt work; no
    # rebuild), and the target's prompt work the step carried whatever the gamma.
    prices: list[np.ndarray] = field(default_factory=list)
    fixed: list[float] = field(default_factory=list)
    tokens: list[np.ndarray] = field(default_factory=list)  # expected tokens per gamma
    rebuild: list[np.ndarray | None] = field(default_factory=list)  # seconds per stretch


class Program:
    """The dynamic program over steps, walked as chunks arrive. States: 0 = the last
    step speculated, l = a gamma-0 stretch of l steps (MAX_STRETCH: at least that
    many). ``on[t, l]`` is the cost of speculating at step t from state l, ``off[t]``
    of gamma 0 (``on`` may have one column: the same cost from every state)."""

    def __init__(self, cap: int = MAX_STRETCH) -> None:
        self.val = np.full(cap + 1, math.inf)
        self.val[0] = 0.0
        self._nxt = np.empty(cap + 1)

    def walk(self, on: np.ndarray, off: np.ndarray) -> None:
        val, nxt = self.val, self._nxt
        cap = val.shape[0] - 1
        tmp = np.empty_like(val)
        least = np.minimum.reduce  # ndarray.min, without its Python-level wrapper
        for on_t, off_t in zip(on, off.tolist(), strict=True):
            # Every stretch grows by one step: nxt[l] = val[l - 1] + off_t.
            np.add(val[:-1], off_t, out=nxt[1:])
            if val[cap] < val[cap - 1]:  # the capped stretch absorbs
                nxt[cap] = val[cap] + off_t
            np.add(val, on_t, out=tmp)
            nxt[0] = least(tmp)
            val, nxt = nxt, val
        self.val, self._nxt = val, nxt

    def value(self) -> float:
        return float(self.val.min())


def per_token_prices(batch: np.ndarray, played: np.ndarray, prices: np.ndarray,
                     tokens: np.ndarray, fixed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each step's per-token price per gamma, and its weight ``B_t`` times the tokens
    the run emitted there (the token weight without its common divisor). The prompt
    work is charged at the run's own tokens: the trajectory (and the step's token
    budget) is the run's, so a gamma that spread it over more tokens would be
    crediting speculation the budget did not have room for."""
    return prices / tokens + (fixed / played)[:, None], batch * played


def program_costs(weight: np.ndarray, per_token: np.ndarray, tokens: np.ndarray,
                  rebuild: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The program's ``on`` and ``off`` of a run of steps (unscaled)."""
    cost = weight[:, None] * per_token
    if rebuild is None:
        return cost[:, 1:].min(axis=1, keepdims=True), cost[:, 0]
    # The cheapest speculating choice after a gamma-0 stretch of l steps: its price
    # plus the rebuild, both per token of that gamma.
    inv = 1.0 / tokens[:, 1:]
    scaled = weight[:, None] * rebuild
    on = cost[:, 1:2] + scaled * inv[:, 0:1]
    for g in range(1, inv.shape[1]):
        np.minimum(on, cost[:, g + 1 : g + 2] + scaled * inv[:, g : g + 1], out=on)
    return on, cost[:, 0]


def bound_ptl_s(d: Trajectory) -> float:
    """The least token-weighted per-token latency over schedules of an explicit
    trajectory (see the module doc)."""
    played = np.asarray(d.played, dtype=np.float64)
    fixed = np.asarray(d.fixed, dtype=np.float64) if d.fixed else np.zeros_like(played)
    tokens = np.vstack(d.tokens)
    per_token, weight = per_token_prices(np.asarray(d.batch, dtype=np.float64), played,
                                         np.vstack(d.prices), tokens, fixed)
    total = played.sum()
    if per_token.shape[1] == 1:
        return float((weight * per_token[:, 0]).sum() / total)
    skip = bool(d.rebuild) and d.rebuild[0] is not None
    rebuild = np.vstack([r for r in d.rebuild if r is not None]) if skip else None
    program = Program()
    for lo in range(0, per_token.shape[0], CHUNK):
        sl = slice(lo, lo + CHUNK)
        program.walk(*program_costs(weight[sl], per_token[sl], tokens[sl],
                                    rebuild[sl] if rebuild is not None else None))
    return program.value() / float(total)
