"""The pure-Python numerics a policy's decision runs on: bucket keys, the geometric
law of tokens per step, and the online fits (the forgetting ridge regression that
``nightjar+``'s step-time model and the rebuild cost fit; the prefill cost).

Kept free of numpy so that a decision costs microseconds: every function here works
on Python floats and ints, and the per-step ones avoid allocation. Acceptance rates
recovered from accepted drafts live in :mod:`nightjar.core.acceptance`.
"""

from __future__ import annotations

from collections.abc import Sequence

from nightjar.errors import NightjarInputError


def bucket_of(batch_size: int) -> int:
    """Power-of-two batch-size bucket: 1 -> 0, 2 -> 1, 3-4 -> 2, 5-8 -> 3, ..., 129-256 -> 8.

    Why powers of two: a decode step's cost is flat while the GPU is memory-bound
    and then grows with the batch, so the right gamma changes on a log scale of B;
    uniform buckets would either blur small batches or split large ones needlessly.
    """
    return (max(batch_size, 1) - 1).bit_length()


# Contexts below this many tokens share one bucket: a short context's KV reads are
# small next to the weights at every batch size, so step time barely moves there.
CONTEXT_BUCKET_BASE = 1024


def context_bucket_of(context_len: float) -> int:
    """Power-of-two context bucket: <1k -> 0, 1-2k -> 1, 2-4k -> 2, ..., 32-64k -> 6.

    Why powers of two: attention reads grow linearly with context, so the point
    where a decode step turns KV-bound (and speculation pays again, MagicDec) moves
    on a log scale of context, as it does of batch size.
    """
    return (max(int(context_len), 0) // CONTEXT_BUCKET_BASE).bit_length()


def expected_tokens(alpha: float, gamma: int) -> float:
    """Mean tokens one request emits in a step: (1 - a^(g+1)) / (1 - a), geometric law."""
    if alpha >= 1.0:
        return float(gamma + 1)
    return (1.0 - alpha ** (gamma + 1)) / (1.0 - alpha)


def expected_tokens_all(alpha: float, gamma_max: int) -> list[float]:
    """``expected_tokens(alpha, g)`` for g = 0..gamma_max, by the running geometric sum."""
    out = [1.0]
    p = 1.0
    for _ in range(gamma_max):
        p *= alpha
        out.append(out[-1] + p)
    return out


def parse_no_arg(name: str, arg: str | None) -> None:
    """Policies without parameters reject ``name:anything`` instead of ignoring it."""
    if arg is not None:
        raise NightjarInputError(f"policy {name!r} takes no argument, got {arg!r}")


class PrefillCost:
    """Learned seconds that prompt tokens prefilled in a step add to the step's time.

    A mixed step (decodes plus admissions) costs the decode the policy chose plus a
    prefill it did not choose; crediting the whole step to the arm confounds the
    arm with the load. The cost is learned per power-of-two bucket of prefilled
    tokens (prefill is flat while memory-bound, then linear, so one per-token rate
    would be wrong at both ends), as an EMA of residuals: the step's time minus the
    policy's own estimate of the decode alone. An unseen bucket borrows the nearest
    learned one; before any is learned the estimate is ``None`` and the caller does
    not credit the step at all.
    Invariant: ``cost[k] >= 0`` for every learned bucket.
    """

    ALPHA = 0.1

    def __init__(self) -> None:
        self._cost: dict[int, float] = {}
        self._n: dict[int, int] = {}

    def learn(self, tokens: int, residual_s: float) -> None:
        if tokens <= 0:
            return
        k = tokens.bit_length()
        n = self._n.get(k, 0) + 1
        self._n[k] = n
        old = self._cost.get(k, 0.0)
        self._cost[k] = max(0.0, old + max(1.0 / n, self.ALPHA) * (residual_s - old))

    def estimate(self, tokens: int) -> float | None:
        """Seconds for ``tokens``; an unseen bucket borrows the nearest learned one."""
        if tokens <= 0:
            return 0.0
        k = tokens.bit_length()
        hit = self._cost.get(k)
        if hit is None and self._cost:
            hit = self._cost[min(self._cost, key=lambda j: abs(j - k))]
        return hit

    def decode_time(self, step_s: float, tokens: int) -> float | None:
        """``step_s`` less the estimated prefill; ``None`` while nothing is learned."""
        cost = self.estimate(tokens)
        return None if cost is None else max(step_s - cost, 0.0)


class RebuildCost:
    """Seconds the draft's KV rebuild costs after ``lag`` missed tokens: ``c0 + r * lag``.

    A rebuild is a draft prefill over the tokens it missed, flat while the prefill is
    memory-bound and then linear, so neither a per-token rate (which turns one
    1-token rebuild into a prohibitive price for 500 tokens) nor a constant (which
    prices a long catch-up as a short one) fits alone. Fitted by forgetting ridge on
    relative residuals; with rebuilds seen at one lag only, the fixed part takes the
    cost (the prior holds the rate near 0), which errs toward turning speculation
    back on, a mistake one rebuild corrects, rather than never turning it on.
    Before any rebuild is seen the cost is 0.
    """

    MEMORY = 50.0  # rebuilds
    # Prior precisions of (fixed seconds, seconds per kilotoken) on relative residuals.
    PRECISION = (1e-8, 1e-4)

    def __init__(self) -> None:
        self._fit = ForgettingRidge(2, 1.0 - 1.0 / self.MEMORY)
        self._theta = (0.0, 0.0)
        self.seen = 0

    def learn(self, lag: float, cost_s: float) -> None:
        if cost_s <= 0.0:
            return
        self._fit.add((1.0, lag / 1000.0), cost_s, 1.0 / (cost_s * cost_s))
        c0, r = self._fit.solve((0.0, 0.0), self.PRECISION)
        self._theta = (c0, r)
        self.seen += 1

    def predict(self, lag: float) -> float:
        c0, r = self._theta
        return max(c0 + r * lag / 1000.0, 0.0)


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
