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

The recorder keeps none of this per step: it buffers a chunk of steps' raw facts
(:data:`nightjar.sim.bound.CHUNK`), prices them together (numpy over the chunk, not
per step) and walks the program (:mod:`nightjar.sim.bound`) forward, so its memory
is one chunk whatever the run's length. The program's costs are kept unscaled:
every step's weight shares one divisor, the run's expected tokens, known only at the
end, and one common factor changes no choice.
"""

from __future__ import annotations

import math

import numpy as np

from nightjar.profile.model import Profile
from nightjar.sim import bound
from nightjar.sim.bound import MAX_STRETCH, Program, per_token_prices, program_costs
from nightjar.sim.price import StepPricer

# The other gammas' prices of a step are looked up at its mean context rounded to this
# many tokens (a cache: a step's price moves little with context).
PRICE_CONTEXT_QUANTUM = 32
# Decision windows (decode steps) of the excess curve: how long a wrong prior misleads.
EXCESS_WINDOWS = ((0, 100), (100, 300), (300, 1000), (1000, 3000), (3000, None))


def rebuild_rate_s(profile: Profile) -> float:
    """The draft prefill's least seconds per token over its table (a lower envelope:
    ``chunked_prefill_s(draft, n) >= rate * n`` for every n)."""
    # Linear between grid points (and from 0 below the first), so time / tokens is
    # least at one of them.
    return min(profile.draft_prefill_time_s(int(t)) / t for t in profile.prefill_grid if t > 0)


class _Chunk:
    """Raw facts of up to ``bound.CHUNK`` decode steps: per step, and per request of each step
    (flat, ``offsets[i]:offsets[i + 1]`` for step i). Reused from chunk to chunk."""

    def __init__(self, gammas: int) -> None:
        self.n = 0
        self.batch = np.empty(bound.CHUNK)
        self.fixed = np.empty(bound.CHUNK)
        self.top = np.empty(bound.CHUNK, dtype=np.int64)
        self.prices = np.empty((bound.CHUNK, gammas))
        self.offsets = np.zeros(bound.CHUNK + 1, dtype=np.int64)
        size = bound.CHUNK * 16
        self.alpha = np.empty(size)
        self.remaining = np.empty(size, dtype=np.int64)
        self.speculates = np.empty(size, dtype=np.bool_)
        self.gamma = np.empty(size, dtype=np.int64)
        self.age = np.empty(size, dtype=np.int64)
        self.key = np.empty(size)
        self.prompt = np.empty(size)

    def _grow(self, size: int) -> None:
        used = int(self.offsets[self.n])

        def grown(old: np.ndarray) -> np.ndarray:
            new = np.empty(size, dtype=old.dtype)
            new[:used] = old[:used]
            return new

        self.alpha, self.remaining = grown(self.alpha), grown(self.remaining)
        self.speculates, self.gamma = grown(self.speculates), grown(self.gamma)
        self.age, self.key, self.prompt = grown(self.age), grown(self.key), grown(self.prompt)

    def room(self, n: int) -> slice:
        """The flat slice of the next step's ``n`` requests (grown if needed)."""
        lo = int(self.offsets[self.n])
        if lo + n > self.alpha.shape[0]:
            self._grow(max(2 * self.alpha.shape[0], lo + n))
        self.offsets[self.n + 1] = lo + n
        return slice(lo, lo + n)


class Recorder:
    """Collects the trajectory during a simulation (one call per decode step) and
    walks the bound's program over it chunk by chunk.

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
        self._g_all = j
        self._decay_powers = self.decay ** (j * (j - 1) / 2.0)
        self.t = 0  # decode steps so far
        self.start = np.zeros(num_requests, dtype=np.int64)  # first decode step of the stay
        self.prompt_at = np.full(num_requests, -1.0)  # half-step key of the prefill
        self.prompt_tokens = np.zeros(num_requests, dtype=np.float64)
        self._prices: dict[tuple[int, int, int, int, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._pricer = StepPricer(profile)  # the engine's prices, bit for bit, memoised
        self._chunk = _Chunk(gamma_max + 1)
        self._program = Program()
        self._own_s = 0.0  # sum over steps of B_t * step_s
        self._tokens = 0.0  # expected tokens of the run's own choices
        self._off_only = 0.0  # the whole (unscaled) cost when gamma_max is 0
        self._excess = np.zeros((len(EXCESS_WINDOWS), 2))  # weighted excess, weight

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
             speculates: np.ndarray | None, gammas: np.ndarray | int, mean_ctx: float,
             prefill_tokens: int, draft_loaded: bool, sync: bool, overhead_s: float,
             step_s: float, switch_s: float) -> None:
        """One decode step: ``speculates`` None where every request may speculate,
        ``gammas`` an int where every request ran the same length."""
        n = int(rids.shape[0])
        n_spec = n if speculates is None else int(speculates.sum())
        if isinstance(gammas, int):
            top, uniform = gammas, True
        else:
            top = int(gammas.max()) if gammas.size else 0
            spec_g = gammas if speculates is None or n_spec == n else gammas[speculates]
            uniform = bool(gammas.size) and (not n_spec or int(spec_g.min()) == int(spec_g.max()))
        key = (n, n_spec, int(mean_ctx) // PRICE_CONTEXT_QUANTUM, prefill_tokens, draft_loaded)
        cached = self._prices.get(key)
        if cached is None:
            cached = self._price(key, n, n_spec, prefill_tokens, draft_loaded, sync)
            self._prices[key] = cached
        total, prompt = cached
        fixed = float(prompt[top])
        c = self._chunk
        i = c.n
        row = c.prices[i]
        np.subtract(total, prompt, out=row)
        row += overhead_s
        if uniform:
            # The gamma that ran is priced as it ran (the cache's context is rounded):
            # the run's own schedule then costs the program what it cost the engine.
            row[top] = step_s - switch_s - fixed
        c.batch[i] = n
        c.fixed[i] = fixed
        c.top[i] = top
        flat = c.room(n)
        c.alpha[flat] = alpha
        c.remaining[flat] = remaining
        c.speculates[flat] = True if speculates is None else speculates
        c.gamma[flat] = gammas
        if self.skip:
            c.age[flat] = self.t - self.start[rids]
            c.key[flat] = self.prompt_at[rids]
            c.prompt[flat] = self.prompt_tokens[rids]
        self._own_s += n * step_s
        c.n += 1
        self.t += 1
        if c.n == bound.CHUNK:
            self._flush()

    def _price(self, key: tuple[int, int, int, int, bool], n: int, n_spec: int,
               prefill_tokens: int, draft_loaded: bool, sync: bool
               ) -> tuple[np.ndarray, np.ndarray]:
        """Per gamma: the step's whole price, and the target's part of its prompt work."""
        total = np.empty(self.gamma_max + 1)
        prompt = np.zeros(self.gamma_max + 1)
        ctx = (key[2] + 0.5) * PRICE_CONTEXT_QUANTUM
        price = self._pricer.price
        for g in range(self.gamma_max + 1):
            # Gamma 0 as the run had it (no draft: no sync forward); speculating needs
            # the draft.
            loaded = draft_loaded if g == 0 else True
            g_max = g if n_spec else 0
            total[g] = price(n, g_max, g * n_spec, ctx, prefill_tokens, loaded, sync)[0]
            if prefill_tokens:
                prompt[g] = price(n, g_max, g * n_spec, ctx, prefill_tokens, False, False)[2]
        return total, prompt

    def _tokens_of(self, m: int, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per step of the chunk: expected emitted tokens per gamma, those of the gamma
        each request ran, and each request's step index."""
        c = self._chunk
        g_all = self._g_all
        # sum_{j <= min(g, rem - 1)} prod_{k < j} a decay^k = a^j decay^(j (j - 1) / 2).
        a = np.clip(c.alpha[:size], 0.0, 0.999)
        reach = a[:, None] ** g_all[None, :]
        if self.decay != 1.0:
            reach *= self._decay_powers[None, :]
        cap = np.where(c.speculates[:size], c.remaining[:size] - 1, 0)
        reach *= g_all[None, :] <= cap[:, None]
        starts = c.offsets[:m]
        tokens = np.cumsum(np.add.reduceat(reach, starts, axis=0), axis=1)
        per = np.cumsum(reach, axis=1)
        ran = per[np.arange(size), np.minimum(c.gamma[:size], self.gamma_max)]
        played = np.add.reduceat(ran, starts)
        step_of = np.repeat(np.arange(m), np.diff(c.offsets[: m + 1]))
        return tokens, played, step_of

    def _rebuild(self, m: int, size: int, step_of: np.ndarray) -> np.ndarray:
        """Per step of the chunk: seconds to rebuild the draft after a gamma-0 stretch
        of 0..MAX_STRETCH steps: one token per request per stretch step it decoded,
        and the prompts prefilled since the stretch began."""
        c = self._chunk
        cap = MAX_STRETCH
        ages = np.minimum(np.maximum(c.age[:size], 0), cap)
        # ge[i, k] = requests of step i that decoded in at least k of the stretch's steps.
        counts = np.bincount(step_of * (cap + 1) + ages, minlength=m * (cap + 1))
        ge = np.cumsum(counts.reshape(m, cap + 1)[:, ::-1], axis=1)[:, ::-1]
        decoded = np.zeros((m, cap + 1))
        decoded[:, 1:] = np.cumsum(ge[:, 1:], axis=1)
        keys = c.key[:size]
        has = keys >= 0
        t_of = (self.t - m + step_of[has]).astype(np.float64)
        lmin = np.minimum(np.floor(t_of - keys[has]).astype(np.int64), cap + 1)
        prompt = np.bincount(step_of[has] * (cap + 2) + lmin, weights=c.prompt[:size][has],
                             minlength=m * (cap + 2)).reshape(m, cap + 2)[:, : cap + 1]
        out: np.ndarray = self.rate * (decoded + np.cumsum(prompt, axis=1))
        return out

    def _flush(self) -> None:
        c = self._chunk
        m = c.n
        if not m:
            return
        size = int(c.offsets[m])
        tokens, played, step_of = self._tokens_of(m, size)
        prices, fixed, batch = c.prices[:m], c.fixed[:m], c.batch[:m]
        per_token, weight = per_token_prices(batch, played, prices, tokens, fixed)
        self._tokens += float(played.sum())
        if self.gamma_max == 0:
            self._off_only += float((weight * per_token[:, 0]).sum())
        else:
            rebuild = self._rebuild(m, size, step_of) if self.skip else None
            self._program.walk(*program_costs(weight, per_token, tokens, rebuild))
        # The excess of each step's chosen gamma over its cheapest (rebuilds aside).
        chosen = per_token[np.arange(m), np.minimum(c.top[:m], self.gamma_max)]
        excess = chosen / per_token.min(axis=1) - 1.0
        first = self.t - m
        for k, (lo, hi) in enumerate(EXCESS_WINDOWS):
            a = max(lo - first, 0)
            b = m if hi is None else min(hi - first, m)
            if a < b:
                self._excess[k, 0] += float(np.dot(weight[a:b], excess[a:b]))
                self._excess[k, 1] += float(weight[a:b].sum())
        c.n = 0

    def summary(self) -> dict[str, float]:
        """``expected_ptl_s`` (the run's own schedule) and ``bound_ptl_s``, and per
        window of decisions the token-weighted mean excess (%) of the chosen gamma's
        per-token price over the step's cheapest: ``excess_pct_LO_HI`` (a window the
        run did not reach is NaN)."""
        self._flush()
        if not self.t or self._tokens <= 0:
            return {"expected_ptl_s": math.nan, "bound_ptl_s": math.nan}
        least = self._off_only if self.gamma_max == 0 else self._program.value()
        out = {"expected_ptl_s": self._own_s / self._tokens, "bound_ptl_s": least / self._tokens}
        for (lo, hi), (num, den) in zip(EXCESS_WINDOWS, self._excess, strict=True):
            key = f"excess_pct_{lo}_{hi if hi is not None else 'end'}"
            out[key] = num / den * 100.0 if den > 0 else math.nan
        return out
