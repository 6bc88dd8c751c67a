"""Small numeric helpers the adaptive policies share.

Kept free of numpy so that a decision costs microseconds: every function here works
on Python floats and ints, and the per-step ones avoid allocation.
"""

from __future__ import annotations

from bisect import bisect_left

from nightjar.errors import NightjarInputError

# Acceptance rates are clipped below 1 so the geometric series stays finite and the
# inversion below stays monotone; a perfect draft is not physical anyway.
MAX_ALPHA = 0.999


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


def parse_no_arg(name: str, arg: str | None) -> None:
    """Policies without parameters reject ``name:anything`` instead of ignoring it."""
    if arg is not None:
        raise NightjarInputError(f"policy {name!r} takes no argument, got {arg!r}")


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
        from nightjar.core.ridge import ForgettingRidge

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
