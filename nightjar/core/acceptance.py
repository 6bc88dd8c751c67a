"""Acceptance rates recovered from what an engine measured (accepted / drafted
tokens), by inverting the geometric law of accepted drafts.

Per step for the policies (:class:`EffectiveAcceptance`, on Python floats: a decision
costs microseconds), and per run for the validator and the live profiler
(:func:`alpha_from_ratio`, vectorised over requests with numpy).
"""

from __future__ import annotations

from bisect import bisect_left

import numpy as np

from nightjar.core.estimators import expected_tokens

# Acceptance rates are clipped below 1 so the geometric series stays finite and the
# inversion below stays monotone; a perfect draft is not physical anyway.
MAX_ALPHA = 0.999


class AcceptanceInverter:
    """Recovers a per-token acceptance rate from the mean accepted drafts per request.

    Under the geometric law a request drafting ``g`` tokens accepts on average
    ``m(a, g) = a (1 - a^g) / (1 - a)`` of them. ``accepted / drafted`` (vLLM's
    "acceptance rate") underestimates ``a`` because drafts after the first
    rejection count as rejected; inverting ``m`` does not. Tables on a fixed grid
    of ``a`` keep the inversion a bisection, with no iteration at run time.
    """

    def __init__(self, gamma_max: int, grid: int = 400) -> None:
        self._alphas = [MAX_ALPHA * i / grid for i in range(grid + 1)]
        # _tables[g][i] = m(alphas[i], g), increasing in i for every g >= 1.
        self._tables: list[list[float]] = [[0.0] * (grid + 1)]
        for g in range(1, gamma_max + 1):
            self._tables.append([expected_tokens(a, g) - 1.0 for a in self._alphas])

    def invert(self, mean_accepted: float, gamma: int) -> float | None:
        """The ``a`` with ``m(a, gamma) = mean_accepted``; ``None`` when gamma is 0."""
        if gamma <= 0 or gamma >= len(self._tables):
            return None
        table = self._tables[gamma]
        i = bisect_left(table, mean_accepted)
        if i <= 0:
            return 0.0
        if i >= len(table):
            return MAX_ALPHA
        lo, hi = table[i - 1], table[i]
        frac = (mean_accepted - lo) / (hi - lo) if hi > lo else 0.0
        return self._alphas[i - 1] + frac * (self._alphas[i] - self._alphas[i - 1])


class EffectiveAcceptance:
    """Per-gamma "effective" acceptance: the ``a`` that makes the geometric mean match.

    With a batch of unequal rates, the mean tokens per request at gamma g is
    ``mean_i tau(a_i, g)``, larger than ``tau(mean a, g)`` for g >= 2 (tau is
    convex in a). Inverting the observed mean at each gamma separately gives an
    ``a_eff(g)`` that reproduces it; it equals the mean rate at g = 1 and rises
    with g. A step of B requests carries ``min(1, B / evidence_batch)`` units of
    evidence; the mean accepted drafts per request at each gamma is the
    evidence-weighted mean of its first ``1 / alpha`` units, then an EMA, and is
    inverted into ``a_eff``; a prior worth ``prior_weight`` units counts among them
    (0: the first step replaces it). A gamma with under ``MIN_EVIDENCE`` units
    borrows the best-supported gamma nearest to it.
    Invariant: ``taus[g] == expected_tokens(estimate used for g, g)`` after every update.
    """

    MIN_EVIDENCE = 2.0

    def __init__(
        self, gamma_max: int, prior: float, alpha: float, evidence_batch: int,
        prior_weight: float = 0.0,
    ) -> None:
        self._inv = AcceptanceInverter(gamma_max)
        self._prior_weight = prior_weight
        self._a = [prior] * (gamma_max + 1)
        self._ev = [0.0] * (gamma_max + 1)
        self._m = [expected_tokens(prior, g) - 1.0 for g in range(gamma_max + 1)]
        self._horizon = 1.0 / alpha
        self._evidence = evidence_batch
        self.taus = [expected_tokens(prior, g) for g in range(gamma_max + 1)]
        self._settled = False  # every gamma has MIN_EVIDENCE of its own

    def _source(self, g: int) -> int:
        if self._ev[g] >= self.MIN_EVIDENCE:
            return g
        known = [s for s in range(1, len(self._a)) if self._ev[s] >= self.MIN_EVIDENCE]
        return min(known, key=lambda s: (abs(s - g), -self._ev[s])) if known else g

    def mean(self) -> float:
        """The batch's mean acceptance rate (the g = 1 estimate, else the nearest)."""
        return self._a[self._source(1)] if len(self._a) > 1 else self._a[0]

    def update(self, gamma: int, accepted: int, batch_size: float) -> None:
        if not 0 < gamma < len(self._a):
            return
        ev = min(1.0, batch_size / self._evidence)
        self._ev[gamma] += ev
        w = ev / min(self._ev[gamma] + self._prior_weight, self._horizon)
        # Average the observed means, then invert: inverting each noisy step first
        # and averaging after would be biased (the inverse is not linear).
        self._m[gamma] += w * (accepted / batch_size - self._m[gamma])
        a = self._inv.invert(self._m[gamma], gamma)
        if a is not None:
            self._a[gamma] = a
        if self._settled:
            # Every gamma is its own source now (evidence only grows): only this
            # gamma's estimate changed, so only its tau can (same values as the loop).
            self.taus[gamma] = expected_tokens(self._a[gamma], gamma)
            return
        for g in range(1, len(self._a)):
            self.taus[g] = expected_tokens(self._a[self._source(g)], g)
        self._settled = all(e >= self.MIN_EVIDENCE for e in self._ev[1:])


def alpha_from_ratio(ratio: np.ndarray, gamma: float) -> np.ndarray:
    """Per-position acceptance ``a`` whose geometric law gives ``accepted/drafted = ratio``.

    Under the truncated geometric law with ``g`` drafts a step accepts on average
    ``a (1 - a^g) / (1 - a)`` of them, so the measured ratio understates ``a``; this
    inverts that (monotone in ``a``) by bisection. NaN stays NaN.
    """
    target = np.clip(ratio, 0.0, 0.98)
    lo, hi = np.zeros_like(target), np.full_like(target, 0.99)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        got = mid * (1.0 - mid**gamma) / ((1.0 - mid) * gamma)
        below = got < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return np.where(np.isnan(ratio), np.nan, 0.5 * (lo + hi))
