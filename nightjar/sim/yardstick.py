"""The bound: the least per-token latency any batch-gamma schedule reaches on a run's
own trajectory, with the draft's rebuild charged. The regret yardstick no policy beats.

The per-step ``oracle`` is myopic (it ignores switch costs), so a policy that avoids
toggling beats it and "regret" turns negative, which says nothing. Here every decode
step of the run is kept as it happened (its batch, contexts, prompt chunks and the
requests' true acceptance rates). A run's per-token latency
(:mod:`nightjar.results.regret`) is the token-weighted mean of its steps' per-token
costs, ``sum_t w_t B_t T_t / E_t`` with ``w_t`` the share of the run's tokens step t
emitted (in expectation). The bound keeps those weights and lets a dynamic program
choose each step's gamma to minimise the same sum, paying at each step

- its price at that gamma (:func:`nightjar.sim.price.price_step`: draft, verify, the
  draft's share of the step's prompt chunks, the sync forward) over the tokens that
  gamma is expected to emit there, plus the target's prompt work of the step over the
  tokens the run emitted there (a mixed step's prompt chunk is the trajectory's, and
  sharing it over more drafted tokens would credit speculation that the step's token
  budget had no room for), and
- in ``--draft-kv skip``, when it speculates, the rebuild of what the draft missed:
  every running request's tokens emitted during the gamma-0 steps since the last
  speculating one, and the prompt chunks prefilled without the draft, at the draft
  prefill's least cost per token (its rate at the cheapest point of its curve).

The weights stay the run's because the trajectory is fixed: a schedule that emitted
more tokens at some step could not shorten it, so crediting those tokens (minimising
the plain ratio of sums) would reward tokens no run could use. The program's state is
the length of the current gamma-0 stretch (capped at :data:`MAX_STRETCH` steps: a
longer one is charged as that long). Every term is at most what the engine charges for
the same choice (the rebuild rate is the curve's least, the lag it counts a subset of
the engine's), and the run's own schedule costs exactly its expected per-token
latency, so ``expected_ptl_s >= bound_ptl_s``: regret against the bound is never
negative. What it bounds: every batch-gamma schedule *on this trajectory*, step by
step. It does not say what another policy, whose choices would have changed the
batches (finishing requests sooner, freeing KV blocks), would have reached, nor
per-request lengths (``tetris``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from nightjar.profile.model import Profile
from nightjar.sim.price import StepShape, price_step

# Longest gamma-0 stretch the program tells apart; longer ones are charged as this
# long, which undercharges their rebuild (the bound stays a bound, a little looser).
MAX_STRETCH = 128
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
    # Seconds a gamma choice costs (decode, draft, the draft's share of prompt work; no
    # rebuild), and the target's prompt work the step carried whatever the gamma.
    prices: list[np.ndarray] = field(default_factory=list)
    fixed: list[float] = field(default_factory=list)
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
        self.played_gammas: list[int] = []  # the batch gamma each decode step ran
        self._prices: dict[tuple[int, int, int, int, bool], tuple[np.ndarray, np.ndarray]] = {}

    def prefilled(self, rids: np.ndarray, tokens: np.ndarray, decode_step: bool) -> None:
        """Prompt chunks of ``rids`` ran this step (a decode step, or a prefill-only
        one); the first chunk of a stay sets its key (a subset of the lag: lower)."""
        key = float(self.t) if decode_step else self.t - 0.5
        fresh = self.prompt_at[rids] < 0
        self.prompt_at[rids[fresh]] = key
        # Only the stay's first chunk: a later one may run with the draft.
        self.prompt_tokens[rids[fresh]] = tokens[fresh]
        self.start[rids] = self.t + (1 if decode_step else 0)

    def left(self, rids: np.ndarray | int) -> None:
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
            cached = self._price(key, n, n_spec, prefill_tokens, draft_loaded, sync)
            self._prices[key] = cached
        total, prompt = cached
        top = int(gammas.max()) if gammas.size else 0
        fixed = float(prompt[top])
        prices = total - prompt + overhead_s
        spec_g = gammas[speculates] if n_spec < n else gammas
        if gammas.size and (not n_spec or int(spec_g.min()) == int(spec_g.max())):
            # The gamma that ran is priced as it ran (the cache's context is rounded):
            # the run's own schedule then costs the program what it cost the engine.
            prices[top] = step_s - switch_s - fixed
        # Expected emitted tokens: sum_{j <= min(g, rem - 1)} prod_{k < j} a decay^k
        # = a^j decay^(j (j - 1) / 2), summed over the batch.
        a = np.clip(alpha, 0.0, 0.999)
        reach = a[:, None] ** g_all[None, :]
        if self.decay != 1.0:
            reach *= self._decay_powers[None, :]
        cap = np.where(speculates, remaining - 1, 0)
        reach *= g_all[None, :] <= cap[:, None]
        tokens = np.cumsum(reach.sum(axis=0))
        if gammas.size and int(gammas.min()) == top:
            played = float(tokens[min(top, self.gamma_max)])
        else:
            per = np.cumsum(reach, axis=1)
            played = float(per[np.arange(n), np.minimum(gammas, self.gamma_max)].sum())
        d = self.data
        self.played_gammas.append(top)
        d.batch.append(n)
        d.step_s.append(step_s)
        d.played.append(played)
        d.prices.append(prices)
        d.fixed.append(fixed)
        d.tokens.append(tokens)
        d.rebuild.append(self._rebuild(rids) if self.skip else None)
        self.t += 1

    def _price(self, key: tuple[int, int, int, int, bool], n: int, n_spec: int,
               prefill_tokens: int, draft_loaded: bool, sync: bool
               ) -> tuple[np.ndarray, np.ndarray]:
        """Per gamma: the step's whole price, and the target's part of its prompt work."""
        total = np.empty(self.gamma_max + 1)
        prompt = np.zeros(self.gamma_max + 1)
        ctx = (key[2] + 0.5) * PRICE_CONTEXT_QUANTUM
        for g in range(self.gamma_max + 1):
            shape = StepShape(
                n_decode=n, g_max=g if n_spec else 0, drafted=g * n_spec, mean_ctx=ctx,
                prefill_tokens=prefill_tokens,
                # Gamma 0 as the run had it (no draft: no sync forward); speculating
                # needs the draft.
                draft_loaded=draft_loaded if g == 0 else True, sync=sync,
            )
            total[g] = price_step(self.profile, shape).total_s
            if prefill_tokens:
                alone = dataclasses.replace(shape, draft_loaded=False, sync=False)
                prompt[g] = price_step(self.profile, alone).prefill_s
        return total, prompt

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
        out = {"expected_ptl_s": own, "bound_ptl_s": bound_ptl_s(d)}
        out.update(decision_excess(d, self.played_gammas))
        return out


# Decision windows (decode steps) of the excess curve: how long a wrong prior misleads.
EXCESS_WINDOWS = ((0, 100), (100, 300), (300, 1000), (1000, 3000), (3000, None))


def decision_excess(d: Trajectory, played: list[int]) -> dict[str, float]:
    """Per window of decisions, the token-weighted mean excess (%) of the chosen gamma's
    per-token price over the step's cheapest (rebuilds aside): ``excess_pct_LO_HI``.
    A window the run did not reach is NaN."""
    prices = np.vstack(d.prices)
    tokens = np.vstack(d.tokens)
    played_tokens = np.asarray(d.played, dtype=np.float64)
    fixed = np.asarray(d.fixed, dtype=np.float64) / played_tokens
    per_token = prices / tokens + fixed[:, None]
    steps = np.arange(per_token.shape[0])
    chosen = per_token[steps, np.minimum(np.asarray(played), per_token.shape[1] - 1)]
    excess = chosen / per_token.min(axis=1) - 1.0
    weight = np.asarray(d.batch, dtype=np.float64) * played_tokens
    out = {}
    for lo, hi in EXCESS_WINDOWS:
        sl = slice(lo, hi)
        w = weight[sl]
        key = f"excess_pct_{lo}_{hi if hi is not None else 'end'}"
        out[key] = float(np.dot(w, excess[sl]) / w.sum() * 100.0) if w.size else math.nan
    return out


def bound_ptl_s(d: Trajectory) -> float:
    """The least token-weighted per-token latency over schedules (see the module doc)."""
    batch = np.asarray(d.batch, dtype=np.float64)
    prices = np.vstack(d.prices)
    tokens = np.vstack(d.tokens)
    played = np.asarray(d.played, dtype=np.float64)
    fixed = np.asarray(d.fixed, dtype=np.float64) if d.fixed else np.zeros_like(played)
    weight = batch * played / played.sum()  # omega_t * B_t
    # The prompt work is charged at the run's own tokens: the trajectory (and the
    # step's token budget) is the run's, so a gamma that spread it over more tokens
    # would be crediting speculation the budget did not have room for.
    per_token = weight[:, None] * (prices / tokens + (fixed / played)[:, None])
    n, gammas = per_token.shape
    cap = MAX_STRETCH
    if gammas == 1:
        return float(per_token[:, 0].sum())
    skip = bool(d.rebuild) and d.rebuild[0] is not None
    # on[t, l]: the cheapest speculating choice at step t after a gamma-0 stretch of l
    # steps: its price plus the rebuild, both per token of that gamma.
    if skip:
        rebuild = np.vstack([r for r in d.rebuild if r is not None])
        inv = 1.0 / tokens[:, 1:]
        on = np.empty((n, cap + 1))
        for lo in range(0, n, 2048):
            hi = min(lo + 2048, n)
            cost = (per_token[lo:hi, None, 1:]
                    + (weight[lo:hi, None] * rebuild[lo:hi])[:, :, None] * inv[lo:hi, None, :])
            on[lo:hi] = cost.min(axis=2)
    else:
        on = np.repeat(per_token[:, 1:].min(axis=1)[:, None], cap + 1, axis=1)
    off = per_token[:, 0]
    return _walk(on, off)


def _walk(on: np.ndarray, off: np.ndarray) -> float:
    """The program over steps. States: 0 = the last step speculated, l = a gamma-0
    stretch of l steps (MAX_STRETCH: at least that many); ``on[t, l]`` is the cost of
    speculating at step t from state l, ``off[t]`` of gamma 0."""
    cap = on.shape[1] - 1
    val = np.full(cap + 1, math.inf)
    val[0] = 0.0
    nxt = np.empty_like(val)
    for t in range(on.shape[0]):
        nxt[1:] = val[:-1]
        if val[cap] < val[cap - 1]:  # the capped stretch absorbs
            nxt[cap] = val[cap]
        nxt += off[t]
        nxt[0] = float(np.min(val + on[t]))
        val, nxt = nxt, val
    return float(val.min())
