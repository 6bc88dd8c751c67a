"""The bound: the least per-token latency any batch-gamma schedule reaches on a run's
own trajectory, with the draft's rebuild charged. The regret yardstick no policy beats.

The per-step ``oracle`` is myopic (it ignores switch costs), so a policy that avoids
toggling beats it and "regret" turns negative, which says nothing. Here every decode
step of the run is kept as it happened (its batch, contexts, prompt chunks and the
requests' true acceptance rates), and a dynamic program chooses one gamma per step
to minimise the run's expected per-token latency (:mod:`nightjar.results.regret`:
request-seconds over tokens), paying for each step

- its price at that gamma (:func:`nightjar.sim.price.price_step`: draft, verify, the
  step's prompt chunks, the sync forward), and
- in ``--draft-kv skip``, when it speculates, the rebuild of what the draft missed:
  every running request's tokens emitted during the gamma-0 steps since the last
  speculating one, and the prompt chunks prefilled without the draft, at the draft
  prefill's least cost per token (its rate at the cheapest point of its curve).

The program's state is the length of the current gamma-0 stretch (capped at
:data:`MAX_STRETCH` steps: a longer one is charged as that long), the objective a
ratio, minimised by Dinkelbach's iteration. Every term it charges is at most what the
engine charges for the same choice (the rebuild rate is the curve's least, the lag it
counts is a subset of the engine's), so the run's own schedule is feasible at no
more than its real cost and ``expected_ptl_s >= bound_ptl_s``: regret against the
bound is never negative. What it bounds: every batch-gamma schedule *on this
trajectory*. It does not say what another policy, whose choices would have changed
the batches (finishing requests sooner, freeing KV blocks), would have reached, nor
per-request lengths (``tetris``); both are compared on their own trajectories.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from nightjar.profile.model import Profile
from nightjar.sim.price import StepShape, price_step

# Longest gamma-0 stretch the program tells apart; longer ones are charged as this
# long, which undercharges their rebuild (the bound stays a bound, a little looser).
MAX_STRETCH = 128
DINKELBACH_ROUNDS = 30
# The other gammas' prices of a step are looked up at its mean context rounded to this
# many tokens (a cache: a step's price moves little with context).
PRICE_CONTEXT_QUANTUM = 32


def rebuild_rate_s(profile: Profile) -> float:
    """The draft prefill's least seconds per token over its table (a lower envelope:
    ``chunked_prefill_s(draft, n) >= rate * n`` for every n)."""
    # Linear between grid points (and from 0 below the first), so time / tokens is
    # least at one of them.
    return min(profile.draft_prefill_time_s(int(t)) / t for t in profile.prefill_grid if t > 0)


@dataclass
class Trajectory:
    """What the program needs per decode step; built by :class:`Recorder`."""

    batch: list[int] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)  # what the run's step cost
    played: list[float] = field(default_factory=list)  # expected tokens of its choice
    prices: list[np.ndarray] = field(default_factory=list)  # seconds per gamma, no rebuild
    tokens: list[np.ndarray] = field(default_factory=list)  # expected tokens per gamma
    rebuild: list[np.ndarray | None] = field(default_factory=list)  # seconds per stretch


class Recorder:
    """Collects the trajectory during a simulation (one call per decode step).

    Per request it keeps the decode step its current stay began at and when its
    prompt was prefilled (in half steps: a V0 prefill-only step sits between two
    decode steps), so the rebuild a stretch would need can be counted at each step.
    """

    def __init__(self, profile: Profile, gamma_max: int, skip: bool, positional_decay: float,
                 positional: bool, num_requests: int) -> None:
        self.profile = profile
        self.gamma_max = gamma_max
        self.skip = skip
        self.rate = rebuild_rate_s(profile) if skip else 0.0
        self.decay = positional_decay if positional else 1.0
        j = np.arange(gamma_max + 1)
        self._decay_powers = self.decay ** (j * (j - 1) / 2.0)
        self.t = 0  # decode steps so far
        self.start = np.zeros(num_requests, dtype=np.int64)  # first decode step of the stay
        self.prompt_at = np.full(num_requests, -1.0)  # half-step key of the prefill
        self.prompt_tokens = np.zeros(num_requests, dtype=np.float64)
        self.data = Trajectory()
        self._prices: dict[tuple[int, int, int, int, bool], np.ndarray] = {}

    def prefilled(self, rids: np.ndarray, tokens: np.ndarray, decode_step: bool) -> None:
        """Prompt chunks of ``rids`` ran this step (a decode step, or a prefill-only
        one); the first chunk of a stay sets its key (a subset of the lag: lower)."""
        key = float(self.t) if decode_step else self.t - 0.5
        fresh = self.prompt_at[rids] < 0
        self.prompt_at[rids[fresh]] = key
        # Only the stay's first chunk: a later one may run with the draft.
        self.prompt_tokens[rids[fresh]] = tokens[fresh]
        self.start[rids] = self.t + (1 if decode_step else 0)

    def left(self, rids: np.ndarray) -> None:
        """Requests that finished or were preempted: a later stay starts afresh."""
        self.prompt_at[rids] = -1.0

    def step(self, *, rids: np.ndarray, alpha: np.ndarray, remaining: np.ndarray,
             speculates: np.ndarray, gammas: np.ndarray, mean_ctx: float, prefill_tokens: int,
             draft_loaded: bool, sync: bool, overhead_s: float, step_s: float,
             switch_s: float) -> None:
        n = int(rids.shape[0])
        g_all = np.arange(self.gamma_max + 1)
        n_spec = int(speculates.sum())
        key = (n, n_spec, int(mean_ctx) // PRICE_CONTEXT_QUANTUM, prefill_tokens, draft_loaded)
        cached = self._prices.get(key)
        if cached is None:
            cached = np.empty(self.gamma_max + 1)
            ctx = (key[2] + 0.5) * PRICE_CONTEXT_QUANTUM
            for g in g_all:
                cached[g] = price_step(self.profile, StepShape(
                    n_decode=n, g_max=int(g) if n_spec else 0, drafted=int(g) * n_spec,
                    mean_ctx=ctx, prefill_tokens=prefill_tokens,
                    # Gamma 0 as the run had it (no draft: no sync forward);
                    # speculating needs the draft.
                    draft_loaded=draft_loaded if g == 0 else True, sync=sync,
                )).total_s
            self._prices[key] = cached
        prices = cached + overhead_s
        spec_g = gammas[speculates] if n_spec < n else gammas
        if gammas.size and (not n_spec or int(spec_g.min()) == int(spec_g.max())):
            # The gamma that ran is priced as it ran (the cache's context is rounded):
            # the run's own schedule then costs the program what it cost the engine.
            prices[int(gammas.max())] = step_s - switch_s
        # Expected emitted tokens: sum_{j <= min(g, rem - 1)} prod_{k < j} a decay^k
        # = a^j decay^(j (j - 1) / 2), summed over the batch.
        a = np.clip(alpha, 0.0, 0.999)
        reach = a[:, None] ** g_all[None, :]
        if self.decay != 1.0:
            reach *= self._decay_powers[None, :]
        cap = np.where(speculates, remaining - 1, 0)
        reach *= g_all[None, :] <= cap[:, None]
        tokens = np.cumsum(reach.sum(axis=0))
        top = int(gammas.max()) if gammas.size else 0
        if gammas.size and int(gammas.min()) == top:
            played = float(tokens[min(top, self.gamma_max)])
        else:
            per = np.cumsum(reach, axis=1)
            played = float(per[np.arange(n), np.minimum(gammas, self.gamma_max)].sum())
        d = self.data
        d.batch.append(n)
        d.step_s.append(step_s)
        d.played.append(played)
        d.prices.append(prices)
        d.tokens.append(tokens)
        d.rebuild.append(self._rebuild(rids) if self.skip else None)
        self.t += 1

    def _rebuild(self, rids: np.ndarray) -> np.ndarray:
        """Seconds to rebuild the draft at this step after a gamma-0 stretch of
        0..MAX_STRETCH steps: one token per request per stretch step it decoded, and
        the prompts prefilled since the stretch began."""
        cap = MAX_STRETCH
        ages = np.minimum(np.maximum(self.t - self.start[rids], 0), cap)
        # ge[k] = requests that decoded in at least k of the stretch's steps.
        ge = np.cumsum(np.bincount(ages, minlength=cap + 1)[::-1])[::-1]
        decoded = np.concatenate(([0.0], np.cumsum(ge[1:])))
        keys = self.prompt_at[rids]
        has = keys >= 0
        lmin = np.floor(self.t - keys[has]).astype(np.int64)
        prompt = np.cumsum(np.bincount(np.minimum(lmin, cap + 1),
                                       weights=self.prompt_tokens[rids][has],
                                       minlength=cap + 2)[: cap + 1])
        out: np.ndarray = self.rate * (decoded + prompt)
        return out

    def summary(self) -> dict[str, float]:
        """``expected_ptl_s`` (the run's own schedule) and ``bound_ptl_s``."""
        d = self.data
        if not d.batch or sum(d.played) <= 0:
            return {"expected_ptl_s": math.nan, "bound_ptl_s": math.nan}
        b = np.asarray(d.batch, dtype=np.float64)
        own = float(np.dot(b, d.step_s) / np.sum(d.played))
        return {"expected_ptl_s": own, "bound_ptl_s": bound_ptl_s(d, own)}


def bound_ptl_s(d: Trajectory, start: float) -> float:
    """Dinkelbach: the least ratio N/E over schedules, from ``start`` (a feasible one)."""
    arrays = _Arrays(d)
    lam = start
    for _ in range(DINKELBACH_ROUNDS):
        value, num, den = _best_schedule(arrays, lam)
        ratio = num / den
        if value >= -1e-12 * max(abs(num), 1e-30) or ratio >= lam:
            return min(lam, ratio)
        lam = ratio
    return lam


class _Arrays:
    """The trajectory as matrices: steps x gammas, steps x stretch lengths."""

    def __init__(self, d: Trajectory) -> None:
        self.batch = np.asarray(d.batch, dtype=np.float64)
        self.prices = np.vstack(d.prices)
        self.tokens = np.vstack(d.tokens)
        n = self.batch.shape[0]
        if d.rebuild and d.rebuild[0] is not None:
            self.rebuild = np.vstack([r for r in d.rebuild if r is not None])
        else:
            self.rebuild = np.zeros((n, MAX_STRETCH + 1))
        self.weighted_rebuild = self.batch[:, None] * self.rebuild


def _best_schedule(arr: _Arrays, lam: float) -> tuple[float, float, float]:
    """min over schedules of sum(B (T + rebuild)) - lam * sum(E), with that schedule's
    numerator and denominator. States: 0 = the last step speculated, l = a gamma-0
    stretch of l steps (MAX_STRETCH: at least that many)."""
    cap = MAX_STRETCH
    cost = arr.batch[:, None] * arr.prices - lam * arr.tokens
    if cost.shape[1] > 1:
        on_g = np.argmin(cost[:, 1:], axis=1) + 1
    else:
        on_g = np.zeros(cost.shape[0], dtype=np.int64)
    steps = np.arange(cost.shape[0])
    on_cost = cost[steps, on_g]
    off_cost = cost[:, 0]
    n = cost.shape[0]
    came_from = np.zeros(n, dtype=np.int64)  # the state speculating at step t came from
    absorbed = np.zeros(n, dtype=bool)  # the capped stretch stayed capped at step t
    val = np.full(cap + 1, math.inf)
    val[0] = 0.0
    shifted = np.empty_like(val)
    weighted = arr.weighted_rebuild
    for t in range(n):
        on_vals = val + weighted[t]
        k = int(np.argmin(on_vals))
        off = off_cost[t]
        shifted[1:] = val[:-1]
        stay = val[cap] < val[cap - 1]
        if stay:
            shifted[cap] = val[cap]
        absorbed[t] = stay
        shifted[0] = on_vals[k] + on_cost[t] - off
        came_from[t] = k
        val, shifted = shifted, val
        val += off
    state = int(np.argmin(val))
    best = float(val[state])
    # Walk the schedule back to sum its numerator and denominator.
    num = den = 0.0
    for t in range(n - 1, -1, -1):
        b = arr.batch[t]
        if state == 0:
            g = int(on_g[t])
            prev = int(came_from[t])
            num += b * (arr.prices[t, g] + arr.rebuild[t, prev])
            den += arr.tokens[t, g]
            state = prev
        else:
            num += b * arr.prices[t, 0]
            den += arr.tokens[t, 0]
            state = cap if state == cap and absorbed[t] else state - 1
    return best, num, den
