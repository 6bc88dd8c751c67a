"""The bound's dynamic program over gamma (see :mod:`nightjar.sim.yardstick`, which
records a run and streams it here chunk by chunk), and the same program over an
explicit trajectory.

Invariant: every cost the program walks carries the same positive factor (the run's
expected tokens, divided out at the end), so the schedule it finds is the one the
token-weighted per-token latency would pick.
"""

from __future__ import annotations

import math
from collections.abc import Callable
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
    many). At step t, speculating from state l costs ``on_t(l)``, gamma 0 ``off_t``.

    Only the states that can still be optimal are kept (the frontier): every
    continuation costs the same from two states except that the longer stretch's
    rebuild is at least as large, so ``on_t`` is non-decreasing in l (a rebuild grows
    with its stretch: :func:`program_costs` and the recorder's rebuild both are) and a
    state whose value is no lower than a shorter one's never wins. Dropping it
    changes no minimum, so the value is the full program's, bit for bit. Invariant:
    ``_ls`` increases and ``_vs`` strictly decreases along the frontier; it is
    usually one state, so a step costs a few float operations, where the full
    program costs MAX_STRETCH + 1 of each.
    """

    def __init__(self, cap: int = MAX_STRETCH) -> None:
        self.cap = cap
        self._ls = [0]
        self._vs = [0.0]

    def walk(self, off: list[float], on0: list[float], on_at: Callable[[int, int], float]
             ) -> None:
        """Steps ``i`` of a chunk: ``off[i]``, ``on0[i]`` (speculating right after a
        speculating step) and ``on_at(i, l)`` for a stretch of l > 0 steps."""
        ls, vs, cap = self._ls, self._vs, self.cap
        for i, off_i in enumerate(off):
            on_i = on0[i]
            best = math.inf
            for stretch, v in zip(ls, vs, strict=True):
                cost = v + (on_i if stretch == 0 else on_at(i, stretch))
                if cost < best:
                    best = cost
            # Gamma 0: every stretch grows by a step (the capped one absorbs).
            new_ls, new_vs = [0], [best]
            floor = best
            for stretch, v in zip(ls, vs, strict=True):
                grown = v + off_i
                if grown < floor:
                    longer = stretch + 1 if stretch < cap else cap
                    if new_ls[-1] == longer:  # stretches cap - 1 and cap meet at cap
                        new_vs[-1] = grown
                    else:
                        new_ls.append(longer)
                        new_vs.append(grown)
                    floor = grown
            ls, vs = new_ls, new_vs
        self._ls, self._vs = ls, vs

    def value(self) -> float:
        return self._vs[-1]


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


def _cells(on: np.ndarray) -> Callable[[int, int], float]:
    """``on_at`` of an explicit ``on`` matrix (one column: the same from every state)."""
    last = on.shape[1] - 1
    return lambda i, stretch: float(on[i, min(stretch, last)])


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
        on, off = program_costs(weight[sl], per_token[sl], tokens[sl],
                                rebuild[sl] if rebuild is not None else None)
        program.walk(off.tolist(), on[:, 0].tolist(), _cells(on))
    return program.value() / float(total)
