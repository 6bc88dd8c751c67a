"""Step-time predictions for ``nightjar+``: one small model of the hardware, learned
from every step that runs, so that evidence at one gamma prices every other.

``T(B, g, c, p)`` (batch, gamma, mean context, prompt tokens in the same step) is a
linear function of a few features of the step, ``theta . phi``; ``theta`` is fitted
online by :class:`nightjar.core.estimators.ForgettingRidge` on relative residuals (each
step weighs ``1 / T^2``, so a 300 ms step does not drown a 20 ms one), at two levels:

- **global**: one ``theta`` for all batch sizes, contexts and gammas, shrunk toward
  the basis' prior. This is what transfers: a step at gamma 3 corrects gamma 0's
  price, a step at B = 8 the price at B = 64;
- **cell** (batch-size bucket x context bucket, :func:`bucket_key`): a ``theta`` of the
  cell's own steps, shrunk toward the *current* global ``theta`` (so a cell never
  carries a stale copy of it), with the same prior shape but tighter. Where a cell
  has evidence it corrects what the global line misses there (a table off by a
  batch-dependent factor, a roofline's knee); a cell without any uses the global.

The features come from a basis:

- :class:`ProfileBasis` when a prior latency model exists (a profile, a step table,
  a roofline): ``phi = (P_g, P_g l(B), P_g - P_0, u)`` with ``P_g = prior(B, g, c)``
  and ``l(B)`` :func:`log_batch`: a scale of the whole table (prior 1, nearly free), its
  slope in log B (a table right at one load and wrong at another, which a fixed
  overhead would otherwise absorb and then pass on to every gamma's cost), an extra
  factor on the cost of speculating (prior 0, stiffer) and a fixed per-step overhead
  in units ``u = prior(1, 0, 0)`` (prior 0, stiffest). From steps at one gamma alone
  scale and speculation cost cannot be told apart; the prior then reads the error as
  a scale, which moves every gamma's price together (a table 30% too slow: gamma 0
  gets 30% cheaper with the gamma that ran), and steps at another gamma split the two.
  Pure decode steps only: a prior has no price for the prompt tokens of a mixed step.
- :class:`NeutralBasis` when nothing is known: ``phi = (1, B (g + 1), g, g B,
  B c / 1024, p)``: a fixed cost per step, a cost per token the target processes
  (decodes and verified drafts alike, which is what ties gamma 0 to gamma 3: on a
  compute-bound engine the verify tokens cost what decode tokens cost), the draft's
  per-forward and per-token cost, the KV read, and prompt tokens. Its prior is a
  neutral shape scaled to the first step seen (:func:`neutral_shape`); mixed steps
  are learned too, since without a prior the evidence is precious and the prompt
  tokens have their own feature.

Predictions are floored at a fraction of the smallest step seen: a linear fit may
extrapolate below zero far from its data, and a zero price would make a gamma free.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from operator import mul
from typing import NamedTuple, Protocol

from nightjar.core.estimators import ForgettingRidge, bucket_of, context_bucket_of
from nightjar.core.types import LatencyModel

# The prior is looked up every this many tokens of context and interpolated between:
# a finer key would only grow the cache. Not read at the quantum's midpoint: a decode
# step at B 250 costs ~4% more per 128 tokens of context (H100-TP2), and features up
# to 2% off their observations fed the fit errors that it spread over its nearly
# collinear weights (the speculation-cost weight drifted 0.10 -> 0.35 while only
# gamma 0 ran, and priced gamma 1 out where it won).
CONTEXT_QUANTUM = 128
# Memory of the global fit and of a cell's, in observations (1 / (1 - forget)): the
# hardware does not change, but a linear model fits the operating point it is at
# best, and the load moves it; a cell sees a narrower range and may forget faster.
GLOBAL_MEMORY = 500.0
CELL_MEMORY = 100.0
# Prior precisions of (scale, scale's slope in log B, speculation cost, overhead) in
# relative units (an observation of a step carries ~1 in the scale direction): the
# scale is nearly free, so an error at one gamma is read as a scale first; the split
# needs steps at two gammas, the slope steps at two batch sizes.
PROFILE_PRECISION = (1e-6, 1e-5, 1e-5, 1e-4)
# A cell's precision around the global estimate: its own scale moves within a few
# steps (a batch-dependent error), its split and overhead much more slowly.
PROFILE_CELL_PRECISION = (1e-4, 1e-3, 1e-3, 1e-2)
# Neutral shape per unit ``u`` of fixed step cost: (fixed, per target token, per draft
# forward, per draft token, per request-kilotoken of context, per prompt token). A
# target token costs u / 64 (the step turns compute-bound near 64 tokens, a middle
# value between a GPU, 100s, and a CPU, a few); a draft forward 10% of the target's
# (a draft model is typically 5-15% of the target).
NEUTRAL_KNEE_TOKENS = 64.0
NEUTRAL_DRAFT_SHARE = 0.1


def neutral_shape() -> tuple[float, ...]:
    k = NEUTRAL_KNEE_TOKENS
    d = NEUTRAL_DRAFT_SHARE
    return (1.0, 1.0 / k, d, d / k, 1.0 / k, 1.0 / k)



# Prior precision of each neutral weight, times its scale squared: about half an
# observation's worth globally (the shape is a guess), a few within a cell.
NEUTRAL_STRENGTH = 1e-4
NEUTRAL_CELL_STRENGTH = 1e-3
# Steps a cell needs before the adjacent cells are shrunk toward its fit.
NEIGHBOUR_EVIDENCE = 10.0
# Steps of a gamma in a cell before its residual ratio (what the linear shape misses
# there, e.g. a roofline knee between two gammas) is half trusted.
RESIDUAL_PRIOR = 10.0
# Every prior precision above is multiplied by this (one knob for how fast the data
# overrule the prior, tuned with the rest: experiments/tune_nightjar_plus.py).
PRECISION_SCALE = 1.0
# No prediction below this fraction of the smallest step observed.
FLOOR_FRACTION = 0.1

Bucket = tuple[int, int]  # (batch-size bucket, context bucket)


def bucket_key(batch_size: int, context_len: float, by_context: bool = True) -> Bucket:
    """``by_context`` false puts every context in bucket 0 (the batch-only ablation)."""
    return bucket_of(batch_size), context_bucket_of(context_len) if by_context else 0


def nearest(keys: Iterable[Bucket], key: Bucket) -> Bucket | None:
    """The bucket closest to ``key`` (batch distance first, then context)."""
    return min(keys, key=lambda k: (abs(k[0] - key[0]) + abs(k[1] - key[1]), k), default=None)


class Basis(Protocol):
    """The features of a step and the prior on their weights."""

    k: int
    learns_mixed: bool  # whether steps with prompt tokens are observations

    def features(self, batch_size: int, gamma: int, context_len: float, prompt: int) -> list[float]:
        ...

    def decode_dots(self, theta: list[float], batch_size: int, context_len: float,
                    arms: int) -> list[float]:
        """``theta . features(batch_size, g, context_len, 0)`` for g < arms, each summed
        from 0 in feature order (as ``sum(map(mul, ...))``)."""
        ...

    def prior(
        self, first_step_s: float | None, first: list[float] | None
    ) -> tuple[list[float], list[float]] | None:
        """(mean, precision) of the global weights, given the first observation (None
        before it: a basis that needs one to set its scale returns None)."""
        ...

    def cell_precision(self, mean: list[float]) -> list[float]:
        ...


def log_batch(batch_size: int) -> float:
    """``(log2 B - 4) / 4``: 0 at B = 16, -1 at B = 1, +1 at B = 256."""
    return (math.log2(max(batch_size, 1)) - 4.0) / 4.0


class ProfileBasis:
    """Features from a prior latency model: scale (and its slope in log B),
    speculation cost, overhead."""

    k = 4
    learns_mixed = False

    def __init__(self, latency: LatencyModel, gamma_max: int) -> None:
        self.latency = latency
        self.gamma_max = gamma_max
        self.unit = max(latency.step_time_s(1, 0, 0.0), 1e-9)
        self._cache: dict[tuple[int, int], list[float]] = {}

    def prior_times(self, batch_size: int, context_len: float) -> list[float]:
        """The prior's decode seconds at every gamma, linear in context between the
        cached points every CONTEXT_QUANTUM tokens."""
        pos = max(context_len, 0.0) / CONTEXT_QUANTUM
        i = int(pos)
        lo = self._at(batch_size, i)
        frac = pos - i
        if frac == 0.0:
            return lo
        hi = self._at(batch_size, i + 1)
        return [a + frac * (b - a) for a, b in zip(lo, hi, strict=True)]

    def _at(self, batch_size: int, point: int) -> list[float]:
        key = (batch_size, point)
        hit = self._cache.get(key)
        if hit is None:
            ctx = float(point * CONTEXT_QUANTUM)
            hit = [self.latency.step_time_s(batch_size, g, ctx) for g in range(self.gamma_max + 1)]
            self._cache[key] = hit
        return hit

    def features(self, batch_size: int, gamma: int, context_len: float, prompt: int) -> list[float]:
        t = self.prior_times(batch_size, context_len)
        g = min(gamma, self.gamma_max)
        return [t[g], t[g] * log_batch(batch_size), t[g] - t[0], self.unit]

    def decode_dots(self, theta: list[float], batch_size: int, context_len: float,
                    arms: int) -> list[float]:
        # features() for every gamma at once: one table lookup, no lists per gamma.
        t = self.prior_times(batch_size, context_len)
        lb, t0, unit = log_batch(batch_size), t[0], self.unit
        w0, w1, w2, w3 = theta
        return [0 + w0 * tg + w1 * (tg * lb) + w2 * (tg - t0) + w3 * unit
                for tg in t[:arms]]

    def prior(
        self, first_step_s: float | None, first: list[float] | None
    ) -> tuple[list[float], list[float]] | None:
        return [1.0, 0.0, 0.0, 0.0], [p * PRECISION_SCALE for p in PROFILE_PRECISION]

    def cell_precision(self, mean: list[float]) -> list[float]:
        return [p * PRECISION_SCALE for p in PROFILE_CELL_PRECISION]


class NeutralBasis:
    """Features of a step's work with no prior: see the module docstring."""

    k = 6
    learns_mixed = True

    def __init__(self) -> None:
        self._scale: list[float] = []

    def features(self, batch_size: int, gamma: int, context_len: float, prompt: int) -> list[float]:
        b = float(batch_size)
        return [1.0, b * (gamma + 1), float(gamma), gamma * b, b * context_len / 1024.0,
                float(prompt)]

    def decode_dots(self, theta: list[float], batch_size: int, context_len: float,
                    arms: int) -> list[float]:
        return [sum(map(mul, theta, self.features(batch_size, g, context_len, 0)))
                for g in range(arms)]

    def prior(
        self, first_step_s: float | None, first: list[float] | None
    ) -> tuple[list[float], list[float]] | None:
        if first_step_s is None or first is None:
            return None  # the scale comes from the first step
        # The unit u that makes the neutral shape predict the first step exactly.
        shape = neutral_shape()
        shape_s = sum(s * x for s, x in zip(shape, first, strict=True))
        unit = first_step_s / max(shape_s, 1e-12)
        self._scale = [s * unit for s in shape]
        return list(self._scale), [NEUTRAL_STRENGTH * PRECISION_SCALE / s**2 for s in self._scale]

    def cell_precision(self, mean: list[float]) -> list[float]:
        return [NEUTRAL_CELL_STRENGTH * PRECISION_SCALE / s**2 for s in self._scale]


class _Cell:
    """One (batch bucket, context bucket): its own fit, and per gamma the discounted
    sums of observed seconds and of features, for the residual of the current fit
    at the steps that gamma ran (``sum_y / theta . sum_x``)."""

    __slots__ = ("center_version", "fit", "gammas", "local", "sum_x", "sum_y", "theta",
                 "version")

    def __init__(self, k: int, gammas: int) -> None:
        self.fit = ForgettingRidge(k, 1.0 - 1.0 / CELL_MEMORY)
        self.gammas = [0.0] * gammas  # discounted observations per gamma
        self.sum_y = [0.0] * gammas
        self.sum_x = [[0.0] * k for _ in range(gammas)]
        self.theta: list[float] | None = None  # solved around the global fit
        self.version = -1  # the global version theta was solved against
        self.local: list[float] | None = None  # solved around its center (_center)
        self.center_version = -1

    def add(self, gamma: int, x: list[float], y: float, w: float) -> None:
        self.fit.add(x, y, w)
        self.version = self.center_version = -1
        f = self.fit.forget
        for g in range(len(self.gammas)):
            self.gammas[g] *= f
            self.sum_y[g] *= f
            row = self.sum_x[g]
            for j in range(len(row)):
                row[j] *= f
        self.gammas[gamma] += 1.0
        self.sum_y[gamma] += y
        row = self.sum_x[gamma]
        for j, v in enumerate(x):
            row[j] += v

    def residual(self, gamma: int, theta: list[float]) -> float:
        """Observed over predicted seconds at this gamma's steps, shrunk toward 1 until
        RESIDUAL_PRIOR steps of it: what the fit's shape misses at this gamma."""
        n = self.gammas[gamma]
        if n <= 0.0:
            return 1.0
        pred: float = sum(map(mul, theta, self.sum_x[gamma]))  # the dot product, in order
        if pred <= 0.0:
            return 1.0
        return 1.0 + n / (n + RESIDUAL_PRIOR) * (self.sum_y[gamma] / pred - 1.0)


class CellView(NamedTuple):
    """One cell as a decision sees it (:meth:`StepModel.look`)."""

    times: list[float]  # predicted decode step seconds at gamma 0..gamma_max
    seen_zero: float  # discounted gamma-0 steps observed in the cell
    evidence: float  # discounted steps of any gamma observed in the cell
    prior: list[float] | None  # the profile prior's times, where asked for


class StepModel:
    """Predicted decode step time of every gamma (see the module docstring).

    Invariant: ``_theta`` is the global solution for the data added so far whenever
    ``_dirty`` is false; a cell's ``theta`` is current iff its ``version`` equals
    ``_version`` (bumped on every global change).
    """

    def __init__(self, basis: Basis, gamma_max: int, by_context: bool = True) -> None:
        self.basis = basis
        self.arms = gamma_max + 1
        self.by_context = by_context
        self._fit = ForgettingRidge(basis.k, 1.0 - 1.0 / GLOBAL_MEMORY)
        self._mean: list[float] = []
        self._precision: list[float] = []
        self._theta: list[float] = []
        self._dirty = False
        self._version = 0
        self._cells: dict[Bucket, _Cell] = {}
        self._floor = 0.0
        known = basis.prior(None, None)
        if known is not None:
            self._mean, self._precision = known
            self._theta = list(self._mean)


    def _global(self) -> list[float]:
        if self._dirty:
            self._theta = self._fit.solve(self._mean, self._precision)
            self._dirty = False
            self._version += 1
        return self._theta

    def _base(self, cell: _Cell) -> list[float]:
        """The cell's fit shrunk toward the global one (cached per global version)."""
        glob = self._global()
        if cell.version != self._version or cell.theta is None:
            cell.theta = cell.fit.solve(glob, self.basis.cell_precision(glob))
            cell.version = self._version
        return cell.theta

    def _center(self, key: Bucket) -> list[float]:
        """What a cell is shrunk toward: the adjacent batch bucket's own fit, where one
        has NEIGHBOUR_EVIDENCE steps, else the global fit. A neighbour's weights are
        a local model of the prior's shape (they take B as a feature), so they carry
        what the global line misses near here, such as the cost of speculating when
        this cell has only run gamma 0."""
        best: _Cell | None = None
        for dk in (-1, 1):
            near = self._cells.get((key[0] + dk, key[1]))
            if near is not None and near.fit.evidence >= NEIGHBOUR_EVIDENCE and (
                best is None or near.fit.evidence > best.fit.evidence
            ):
                best = near
        return self._base(best) if best is not None else self._global()

    def _cell_theta(self, key: Bucket, cell: _Cell | None) -> list[float]:
        center = self._center(key)
        if cell is None or cell.fit.evidence <= 0.0:
            return center
        if cell.center_version != self._version or cell.local is None:
            cell.local = cell.fit.solve(center, self.basis.cell_precision(center))
            cell.center_version = self._version
        return cell.local

    def times(self, batch_size: int, context_len: float) -> list[float]:
        """Predicted seconds of a pure decode step at every gamma 0..gamma_max."""
        if not self._mean:
            return [1.0] * self.arms  # nothing known yet: only the rest of the loss matters
        key = bucket_key(batch_size, context_len, self.by_context)
        cell = self._cells.get(key)
        theta = self._cell_theta(key, cell)
        floor = self._floor
        out = []
        for g, t in enumerate(self.basis.decode_dots(theta, batch_size, context_len, self.arms)):
            if cell is not None:
                t *= cell.residual(g, theta)
            out.append(floor if floor > t else t)  # max(t, floor), without the call
        return out

    @property
    def fitted(self) -> bool:
        """Whether :meth:`times` predicts anything yet (a prior or one step)."""
        return bool(self._mean)

    def look(self, batch_size: int, context_len: float, prior_below: float) -> CellView:
        """All that one decision reads of the cell at ``(batch_size, context_len)``, in
        one call: predicted times, gamma 0's and all gammas' discounted steps there,
        and the prior's own times where gamma 0 has fewer than ``prior_below`` steps
        (the probe's question; None without a profile prior)."""
        cell = self._cells.get(bucket_key(batch_size, context_len, self.by_context))
        seen_zero = cell.gammas[0] if cell is not None else 0.0
        prior = None
        basis = self.basis
        if seen_zero < prior_below and isinstance(basis, ProfileBasis):
            prior = basis.prior_times(batch_size, context_len)
        return CellView(
            self.times(batch_size, context_len), seen_zero,
            sum(cell.gammas) if cell is not None else 0.0, prior,
        )

    def learn(
        self, batch_size: int, gamma: int, step_s: float, context_len: float, prompt: int = 0
    ) -> None:
        """One observed step (switch cost already taken out); mixed steps only where
        the basis can price their prompt tokens."""
        if step_s <= 0.0 or gamma >= self.arms or (prompt and not self.basis.learns_mixed):
            return
        x = self.basis.features(batch_size, gamma, context_len, prompt)
        if not self._mean:
            prior = self.basis.prior(step_s, x)
            assert prior is not None  # a basis always has one after its first step
            self._mean, self._precision = prior
            self._theta = list(self._mean)
        self._floor = min(self._floor, FLOOR_FRACTION * step_s) if self._floor else (
            FLOOR_FRACTION * step_s)
        w = 1.0 / (step_s * step_s)
        self._fit.add(x, step_s, w)
        self._dirty = True
        key = bucket_key(batch_size, context_len, self.by_context)
        cell = self._cells.get(key)
        if cell is None:
            cell = self._cells[key] = _Cell(self.basis.k, self.arms)
        cell.add(gamma, x, step_s, w)
