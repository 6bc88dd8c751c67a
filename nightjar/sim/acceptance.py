"""Sampling how many drafted tokens the target accepts, vectorised over the batch."""

from __future__ import annotations

import numpy as np

from nightjar.sim.knobs import AcceptanceModel

MAX_ALPHA = 0.999  # keeps log(alpha) finite; a perfect draft is not physical anyway
MIN_ALPHA = 1e-9


def sample_accepted(
    rng: np.random.Generator,
    alpha: np.ndarray,
    gamma: np.ndarray,
    model: AcceptanceModel,
    decay: float,
) -> np.ndarray:
    """Accepted draft tokens per request: an int array with ``0 <= out <= gamma``.

    GEOMETRIC uses ``floor(ln U / ln a)``, the number of leading successes of
    Bernoulli(a) trials (P(K >= k) = a^k), capped at gamma: one uniform per request.
    The engine runs the same draw inline (``Engine._accept``) with ``log(a)`` kept per
    running request; both must consume the generator identically.
    """
    n = alpha.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    a = np.clip(alpha, MIN_ALPHA, MAX_ALPHA)
    if model is AcceptanceModel.GEOMETRIC:
        u = rng.random(n)
        k = np.floor(np.log(u) / np.log(a))
        out: np.ndarray = np.minimum(k, gamma).astype(np.int64)
        return out
    width = int(gamma.max())
    if width == 0:
        return np.zeros(n, dtype=np.int64)
    # A scalar's pow is the C library's on every CPU (nightjar.core.powers).
    probs = a[:, None] * np.array([decay**i for i in range(width)])[None, :]
    ok = rng.random((n, width)) < probs
    ok &= np.arange(width)[None, :] < gamma[:, None]
    # Leading successes: index of the first failure, or the full width.
    first_fail = np.where(ok.all(axis=1), width, np.argmin(ok, axis=1))
    return first_fail.astype(np.int64)

