"""Sampling how many drafted tokens the target accepts, vectorised over the batch."""

from __future__ import annotations

import numpy as np

from nightjar.sim.knobs import AcceptanceModel

MAX_ALPHA = 0.999  # keeps log(alpha) finite; a perfect draft is not physical anyway
MIN_ALPHA = 1e-9
# Uniforms the geometric draw takes from the generator at a time.
UNIFORM_BLOCK = 1 << 15


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
    The engine's :class:`AcceptanceDraws` runs the same draw with ``log(a)`` kept per
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



class AcceptanceDraws:
    """A run's sampled acceptance: one generator, used one way for the whole run.

    GEOMETRIC (:meth:`geometric`): ``min(ln U / ln a, gamma)`` truncated, with
    ``ln a`` given per request; truncating after the cap equals the floor before it
    (the ratio is >= 0, and an infinite one is capped first). The ``ln U`` are drawn
    ahead in blocks: one draw of many doubles is the same stream as many draws of a
    few (each double takes the generator's next 64 bits), and the log is
    elementwise, so the draws are those of ``rng.random(n)`` step by step. The
    positional model (:meth:`positional`) draws from the generator itself.
    """

    def __init__(self, seed: int, model: AcceptanceModel, decay: float) -> None:
        self.rng = np.random.default_rng([seed, 11])
        self.model = model
        self.decay = decay
        self.is_geometric = model is AcceptanceModel.GEOMETRIC
        self._log_u = np.zeros(0)
        self._pos = 0

    def geometric(self, gam: int | np.ndarray, log_alpha: np.ndarray) -> np.ndarray:
        """Accepted drafts of requests whose clipped ``log(alpha)`` is given."""
        n = log_alpha.shape[0]
        pos = self._pos
        if pos + n > self._log_u.shape[0]:
            self._refill(n)
            pos = 0
        self._pos = pos + n
        u = self._log_u[pos : pos + n] / log_alpha
        acc: np.ndarray = np.minimum(u, gam).astype(np.int64)
        return acc

    def positional(self, gam: int | np.ndarray, alpha: np.ndarray) -> np.ndarray:
        """Accepted drafts of requests of acceptance ``alpha`` (``sample_accepted``)."""
        n = alpha.shape[0]
        gammas = np.full(n, gam, dtype=np.int64) if isinstance(gam, int) else gam
        return sample_accepted(self.rng, alpha, gammas, self.model, self.decay)

    def _refill(self, n: int) -> None:
        """The next ``UNIFORM_BLOCK`` (at least ``n``) uniforms, logged, after what is left."""
        rest = self._log_u[self._pos :]
        fresh = np.log(self.rng.random(max(UNIFORM_BLOCK, n)))
        self._log_u = np.concatenate((rest, fresh)) if rest.size else fresh
        self._pos = 0
