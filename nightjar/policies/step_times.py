"""Step-time predictions for ``nightjar+``: from the profile, or learned online.

Both answer "how long does a decode step of batch B take at gamma 0..gamma_max",
as a list indexed by gamma. The profile is the prior when one exists; without one
the times are learned per (batch-size bucket, context bucket) from the steps that ran:
at long contexts a step reads more KV than weights, so the same batch size costs
(and rewards speculation) differently.
"""

from __future__ import annotations

from collections.abc import Iterable

from nightjar.core.estimators import bucket_of, context_bucket_of
from nightjar.core.types import LatencyModel

# Context length is quantised to this many tokens for the profile cache: step time
# moves slowly with context, and a finer key would only grow the cache.
CONTEXT_QUANTUM = 128
# Without data on a second arm, each extra drafted position is assumed to add this
# fraction of the observed step time (a draft model is typically 5-15% of the
# target); the first observation of a neighbouring arm replaces the guess.
PRIOR_SLOPE = 0.1
ONLINE_ALPHA = 0.1


class ProfileTimes:
    """Cached ``latency.step_time_s`` for every gamma; profile lookups are not free."""

    def __init__(self, latency: LatencyModel, gamma_max: int) -> None:
        self.latency = latency
        self.gamma_max = gamma_max
        self._cache: dict[tuple[int, int], list[float]] = {}

    def times(self, batch_size: int, context_len: float) -> list[float]:
        key = (batch_size, int(context_len) // CONTEXT_QUANTUM)
        hit = self._cache.get(key)
        if hit is None:
            ctx = float(key[1] * CONTEXT_QUANTUM + CONTEXT_QUANTUM // 2)
            hit = [self.latency.step_time_s(batch_size, g, ctx) for g in range(self.gamma_max + 1)]
            self._cache[key] = hit
        return hit

    def learn(
        self, batch_size: int, gamma: int, step_time_s: float, context_len: float = 0.0
    ) -> None:
        pass  # the profile is fixed; the caller's correction ratios absorb its error

    def known(self, batch_size: int, gamma: int, context_len: float = 0.0) -> bool:
        return True


Bucket = tuple[int, int]  # (batch-size bucket, context bucket)


def bucket_key(batch_size: int, context_len: float, by_context: bool = True) -> Bucket:
    """``by_context`` false puts every context in bucket 0 (the batch-only ablation)."""
    return bucket_of(batch_size), context_bucket_of(context_len) if by_context else 0


def nearest(keys: Iterable[Bucket], key: Bucket) -> Bucket | None:
    """The learned bucket closest to ``key`` (batch distance first, then context)."""
    return min(keys, key=lambda k: (abs(k[0] - key[0]) + abs(k[1] - key[1]), k), default=None)


class OnlineTimes:
    """Per-bucket EMA of step time per gamma, with a linear guess for unseen gammas.

    Invariant: ``_seen[c][g]`` is true iff ``_time[c][g]`` holds an observation.
    Predictions are recomputed only when a bucket learns something.
    """

    def __init__(self, gamma_max: int, by_context: bool = True) -> None:
        self.arms = gamma_max + 1
        self.by_context = by_context
        self._time: dict[Bucket, list[float]] = {}
        self._seen: dict[Bucket, list[bool]] = {}
        self._pred: dict[Bucket, list[float]] = {}

    def times(self, batch_size: int, context_len: float) -> list[float]:
        c = bucket_key(batch_size, context_len, self.by_context)
        hit = self._pred.get(c)
        if hit is not None:
            return hit
        # Borrow the nearest bucket's curve until this one has its own data.
        near = nearest(self._pred, c)
        if near is None:
            return [1.0] * self.arms  # nothing known anywhere: only ratios matter
        return self._pred[near]

    def known(self, batch_size: int, gamma: int, context_len: float = 0.0) -> bool:
        """Whether ``times`` for this bucket and gamma rests on an observation."""
        seen = self._seen.get(bucket_key(batch_size, context_len, self.by_context))
        return seen is not None and seen[gamma]

    def learn(
        self, batch_size: int, gamma: int, step_time_s: float, context_len: float = 0.0
    ) -> None:
        c = bucket_key(batch_size, context_len, self.by_context)
        if c not in self._time:
            self._time[c] = [0.0] * self.arms
            self._seen[c] = [False] * self.arms
        t, seen = self._time[c], self._seen[c]
        t[gamma] = step_time_s if not seen[gamma] else t[gamma] + ONLINE_ALPHA * (
            step_time_s - t[gamma]
        )
        seen[gamma] = True
        self._pred[c] = self._fill(t, seen)

    def _fill(self, t: list[float], seen: list[bool]) -> list[float]:
        pts = [(g, t[g]) for g in range(self.arms) if seen[g]]
        if len(pts) == 1:
            g0, t0 = pts[0]
            slope, icept = PRIOR_SLOPE * t0, t0 - PRIOR_SLOPE * t0 * g0
        else:
            n = len(pts)
            mg = sum(g for g, _ in pts) / n
            mt = sum(x for _, x in pts) / n
            var = sum((g - mg) ** 2 for g, _ in pts)
            slope = sum((g - mg) * (x - mt) for g, x in pts) / var
            icept = mt - slope * mg
        floor = min(x for _, x in pts) * 0.5
        return [t[g] if seen[g] else max(icept + slope * g, floor) for g in range(self.arms)]
