"""The batch's expected tokens from each running request's own acceptance, and the
tokens a request loses past its end.

A batch-level estimate of acceptance goes stale whenever the batch's members change:
with short answers (Alpaca: ~20 steps a request) half the batch is new every few dozen
steps, and a per-gamma average learned while other requests ran prices the current
ones wrong. Keeping one estimate per request and summing over whoever runs now tracks
the batch's composition exactly.

- **Per request**: ``k`` drafts accepted of ``g`` proposed has likelihood
  ``a^k (1 - a)^[k < g]`` under the geometric law (the first rejection ends the run),
  which is conjugate to a Beta prior: the posterior is ``Beta(p m + S, p (1 - m) + F)``
  with ``S`` the accepted drafts, ``F`` the rejections seen and ``m`` the population's
  mean rate (a request not yet seen gets ``m``), worth :data:`PRIOR_WEIGHT` steps.
- **The batch**: ``tau(a, g) = sum_{j <= g} a^j`` is a polynomial in ``a``, so the
  batch's mean expected tokens at every gamma needs only the means of the powers of
  the requests' rates, ``M_j`` (numpy over the batch, no per-request Python loop).
- **Tokens past the end**: a request with ``R`` tokens left that emits ``k = accepted +
  1`` keeps ``min(k, R)``. With a locally flat chance ``rho`` per token that the answer
  ends, a step loses ``rho E[k (k - 1)] / 2`` tokens per request; ``E[k (k - 1)]`` is
  again a polynomial in ``a``. ``rho`` is one number learned from every speculating
  decode step (accepted + batch - emitted tokens lost), shared by all gammas, so a
  gamma never run is priced by the same law. Short answers lose several percent of
  the geometric expectation (6% at gamma 3 on Alpaca-length outputs), more at longer
  gammas: counting those tokens made the policy prefer gamma 3 where gamma 2 served
  the same tokens sooner.

Invariants: ``useful[0] == 1``; ``1 <= useful[g] <= taus[g]`` for every gamma.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from nightjar.core.acceptance import MAX_ALPHA

# What the population's mean rate is worth in a request's posterior, in steps: a
# request's own rate takes over within a handful of its steps (a 20-step answer is
# mostly its own), while its first step alone cannot set it to 0 or 1.
PRIOR_WEIGHT = 4.0


class RequestAcceptance:
    """Per-request Beta posteriors of the acceptance rate, and the truncation rate.

    Ids are the engine's stable request ids (non-negative ints); their posteriors live
    in arrays grown on demand, so an observation and a batch's prices are a few numpy
    operations each.
    """

    def __init__(self, gamma_max: int, alpha: float) -> None:
        self._g = gamma_max
        self._alpha = alpha  # EMA weight of the truncation rate's two sums
        self._s = np.zeros(64)  # accepted drafts per request
        self._f = np.zeros(64)  # rejections seen per request
        self._lost = 0.0  # EMA of tokens lost past the end per step
        self._exposed = 0.0  # EMA of sum over the step's requests of E[k (k - 1)] / 2

    @property
    def rho(self) -> float:
        """Chance per token that an answer ends (0 before any speculating step)."""
        return self._lost / self._exposed if self._exposed > 0.0 else 0.0

    def _index(self, ids: Sequence[int]) -> np.ndarray:
        """``ids`` as an index array, the posterior arrays grown to hold every one."""
        idx = np.asarray(ids, dtype=np.int64)
        top = int(idx.max()) + 1 if idx.size else 0
        if top > self._s.size:
            self._grow(top)
        return idx

    def _rates(self, idx: np.ndarray, mean: float) -> np.ndarray:
        s, f = self._s[idx], self._f[idx]
        a0 = PRIOR_WEIGHT * mean
        rates: np.ndarray = np.minimum((a0 + s) / (PRIOR_WEIGHT + s + f), MAX_ALPHA)
        return rates

    def _grow(self, size: int) -> None:
        new = max(size, 2 * self._s.size)
        self._s = np.concatenate((self._s, np.zeros(new - self._s.size)))
        self._f = np.concatenate((self._f, np.zeros(new - self._f.size)))

    def _moments(self, rates: np.ndarray) -> list[float]:
        """``M_j``, the batch's mean of ``a^j``, for j = 0..gamma_max."""
        out, power = [1.0], rates
        for _ in range(self._g):
            out.append(float(power.mean()))
            power = power * rates
        return out

    def _half_m2(self, m: list[float]) -> list[float]:
        """``E[k (k - 1)] / 2`` per gamma, from the moments: ``P(k) = a^(k-1) (1 - a)``
        for k <= g and ``P(g + 1) = a^g``."""
        out = [0.0]
        for g in range(1, self._g + 1):
            head = sum(k * (k - 1) * (m[k - 1] - m[k]) for k in range(2, g + 1))
            out.append((head + (g + 1) * g * m[g]) / 2.0)
        return out

    def useful_tokens(self, ids: Sequence[int], mean: float,
                      optimism: float = 0.0) -> list[float] | None:
        """Mean tokens per request the batch ``ids`` keeps at each gamma; None for an
        empty batch (the caller keeps its batch-level estimate).

        ``optimism`` (z > 0): every rate raised by z standard deviations of the batch's
        mean rate under the posteriors, ``sqrt(sum var_i) / B``: what the batch may
        still turn out to keep. The bonus shrinks as requests are seen and as the batch
        grows, so it matters at small batches of little-known requests.
        """
        if not len(ids):
            return None
        idx = self._index(ids)
        rates = self._rates(idx, mean)
        if optimism > 0.0:
            n = PRIOR_WEIGHT + self._s[idx] + self._f[idx]
            var = rates * (1.0 - rates) / (n + 1.0)  # the Beta posterior's variance
            bonus = optimism * float(np.sqrt(var.sum())) / idx.size
            rates = np.minimum(rates + bonus, MAX_ALPHA)
        m = self._moments(rates)
        lost = self._half_m2(m)
        taus, total = [], 0.0
        for g in range(self._g + 1):
            total += m[g]
            taus.append(max(1.0, total - self.rho * lost[g]))
        return taus

    def observe(self, ids: Sequence[int], accepted: Sequence[int], drafted: Sequence[int],
                mean: float, lost: float | None) -> None:
        """One step's per-request outcome; ``lost`` (tokens past the requests' ends, or
        None where the step cannot tell: a prompt finished in it) teaches ``rho``."""
        if not len(ids):
            return
        idx = self._index(ids)
        k = np.asarray(accepted, dtype=np.float64)
        d = np.asarray(drafted, dtype=np.float64)
        if lost is not None and d.max() > 0:
            half = self._half_m2(self._moments(self._rates(idx, mean)))
            counts = np.bincount(d.astype(np.int64), minlength=self._g + 1)
            exposed = sum(half[g] * int(counts[g]) for g in range(1, self._g + 1))
            self._lost += self._alpha * (lost - self._lost)
            self._exposed += self._alpha * (exposed - self._exposed)
        drafting = d > 0
        np.add.at(self._s, idx[drafting], k[drafting])
        np.add.at(self._f, idx[drafting], (k < d)[drafting].astype(np.float64))
