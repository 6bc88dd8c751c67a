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
        if self.k == 4:  # (the profile basis: the loops below, written out)
            x0, x1, x2, x3 = x
            for i, row in enumerate(self._a):
                wx = weight * x[i]
                b[i] = f * b[i] + wx * y
                row[0] = f * row[0] + wx * x0
                row[1] = f * row[1] + wx * x1
                row[2] = f * row[2] + wx * x2
                row[3] = f * row[3] + wx * x3
            self.evidence = f * self.evidence + weight
            return
        for i, row in enumerate(self._a):
            wx = weight * x[i]
            b[i] = f * b[i] + wx * y
            for j in range(self.k):
                row[j] = f * row[j] + wx * x[j]
        self.evidence = f * self.evidence + weight

    def solve(self, mean: Sequence[float], precision: Sequence[float]) -> list[float]:
        """``theta`` for the prior ``mean`` with diagonal ``precision`` (all > 0)."""
        if self.k == 4:
            return _solve4(self._a, self._b, mean, precision)
        return _solve(self._a, self._b, mean, precision)


def _solve(a: list[list[float]], b: list[float], mean: Sequence[float],
           precision: Sequence[float]) -> list[float]:
    """Gaussian elimination on ``(A + P) theta = b + P m``: the matrix is symmetric
    positive definite (a Gram matrix plus a positive diagonal), so no pivoting."""
    k = len(b)
    m = [row[:] for row in a]
    v = b[:]
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


def _solve4(a: list[list[float]], b: list[float], mean: Sequence[float],
            precision: Sequence[float]) -> list[float]:
    """:func:`_solve` for k = 4, the loops written out: the same
    operations in the same order (a test holds the two equal bit for bit), at a
    fraction of the interpreter's cost; ``nightjar+`` solves three of these a step."""
    (a00, a01, a02, a03), (a10, a11, a12, a13), (a20, a21, a22, a23), (a30, a31, a32, a33) = a
    p0, p1, p2, p3 = precision
    a00 += p0
    a11 += p1
    a22 += p2
    a33 += p3
    v0 = b[0] + p0 * mean[0]
    v1 = b[1] + p1 * mean[1]
    v2 = b[2] + p2 * mean[2]
    v3 = b[3] + p3 * mean[3]
    f = a10 / a00
    if f:
        a11 -= f * a01
        a12 -= f * a02
        a13 -= f * a03
        v1 -= f * v0
    f = a20 / a00
    if f:
        a21 -= f * a01
        a22 -= f * a02
        a23 -= f * a03
        v2 -= f * v0
    f = a30 / a00
    if f:
        a31 -= f * a01
        a32 -= f * a02
        a33 -= f * a03
        v3 -= f * v0
    f = a21 / a11
    if f:
        a22 -= f * a12
        a23 -= f * a13
        v2 -= f * v1
    f = a31 / a11
    if f:
        a32 -= f * a12
        a33 -= f * a13
        v3 -= f * v1
    f = a32 / a22
    if f:
        a33 -= f * a23
        v3 -= f * v2
    o3 = v3 / a33
    o2 = (v2 - a23 * o3) / a22
    o1 = (v1 - a12 * o2 - a13 * o3) / a11
    o0 = (v0 - a01 * o1 - a02 * o2 - a03 * o3) / a00
    return [o0, o1, o2, o3]
