"""Exponentially weighted least squares shrunk toward a prior: the online regression
that ``nightjar+``'s step-time model fits (:mod:`nightjar.policies.step_times`).

Pure Python on a handful of features (k <= 8), so that one update and one solve cost
microseconds, like the rest of a policy's decision.
"""

from __future__ import annotations

from collections.abc import Sequence


class ForgettingRidge:
    """Minimises ``sum_i f^(n-i) w_i (y_i - theta . x_i)^2 + sum_j p_j (theta_j - m_j)^2``.

    The data term forgets (factor ``f`` per observation, a memory of about
    ``1 / (1 - f)`` observations) and the prior term does not: where the data stop
    exciting a direction, the estimate returns to the prior instead of drifting
    ("covariance wind-up" of plain recursive least squares with forgetting). The
    prior mean and precision are given at solve time, so a caller may centre one
    model on another's current estimate (a hierarchy) without refitting.
    Invariant: ``_a`` is the (symmetric) discounted sum of ``w x x^T``, ``_b`` of
    ``w x y``, ``evidence`` of ``w``.
    """

    __slots__ = ("_a", "_b", "evidence", "forget", "k")

    def __init__(self, k: int, forget: float) -> None:
        if not 0.0 < forget <= 1.0:
            raise ValueError(f"forgetting factor must be in (0, 1], got {forget}")
        self.k = k
        self.forget = forget
        self._a = [[0.0] * k for _ in range(k)]
        self._b = [0.0] * k
        self.evidence = 0.0

    def add(self, x: Sequence[float], y: float, weight: float = 1.0) -> None:
        f = self.forget
        b = self._b
        for i, row in enumerate(self._a):
            wx = weight * x[i]
            b[i] = f * b[i] + wx * y
            for j in range(self.k):
                row[j] = f * row[j] + wx * x[j]
        self.evidence = f * self.evidence + weight

    def solve(self, mean: Sequence[float], precision: Sequence[float]) -> list[float]:
        """``theta`` for the prior ``mean`` with diagonal ``precision`` (all > 0).

        Gaussian elimination on ``(A + P) theta = b + P m``: the matrix is symmetric
        positive definite (a Gram matrix plus a positive diagonal), so no pivoting.
        """
        k = self.k
        m = [row[:] for row in self._a]
        v = self._b[:]
        for i in range(k):
            m[i][i] += precision[i]
            v[i] += precision[i] * mean[i]
        for i in range(k):
            row_i = m[i]
            piv = row_i[i]
            v_i = v[i]
            cols = range(i + 1, k)
            for r in cols:
                row_r = m[r]
                f = row_r[i] / piv
                if f:
                    # Column i below the pivot is never read again: not updated.
                    for c in cols:
                        row_r[c] -= f * row_i[c]
                    v[r] -= f * v_i
        out = [0.0] * k
        for i in range(k - 1, -1, -1):
            s = v[i]
            row_i = m[i]
            for c in range(i + 1, k):
                s -= row_i[c] * out[c]
            out[i] = s / row_i[i]
        return out
