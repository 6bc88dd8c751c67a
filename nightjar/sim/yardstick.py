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
from nightjar.sim.chunk import Chunk
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


class Recorder:
    """Collects the trajectory during a simulation (one call per decode step) and
    walks the bound's program over it chunk by chunk.

    Per request it keeps the decode step its current stay began at and when its
    prompt was prefilled (in half steps: a V0 prefill-only step sits between two
    decode steps), so the rebuild a stretch would need can be counted at each step.
    """

    def __init__(self, profile: Profile, gamma_max: int, skip: bool, positional_decay: float,
                 positional: bool, alpha: np.ndarray) -> None:
        self.profile = profile
        self.gamma_max = gamma_max
        self.skip = skip
        self.rate = rebuild_rate_s(profile) if skip else 0.0
        self.decay = positional_decay if positional else 1.0
        j = np.arange(gamma_max + 1)
        self._g_all = j
        self._decay_powers = self.decay ** (j * (j - 1) / 2.0)
        # Each request's reach: the chance that its j-th draft is emitted,
        # a^j decay^(j (j - 1) / 2), computed once (its acceptance rate never changes).
        reach = np.clip(alpha, 0.0, 0.999)[None, :] ** j[:, None]
        if self.decay != 1.0:
            reach *= self._decay_powers[:, None]
        self._reach = reach
        num_requests = int(alpha.shape[0])
        self.t = 0  # decode steps so far
        self.start = np.zeros(num_requests, dtype=np.int64)  # first decode step of the stay
        self.prompt_at = np.full(num_requests, -1.0)  # half-step key of the prefill
        self.prompt_tokens = np.zeros(num_requests, dtype=np.float64)
        # Per step shape: (price less the prompt work, the prompt work) per gamma.
        self._prices: dict[tuple[int, int, int, int, bool], tuple[np.ndarray, list[float]]] = {}
        self._decode: dict[tuple[int, int, int, bool], np.ndarray] = {}
        self._pricer = StepPricer(profile)  # the engine's prices, bit for bit, memoised
        self._chunk = Chunk()
        self._program = Program()
        self._own_s = 0.0  # sum over steps of B_t * step_s
        self._tokens = 0.0  # expected tokens of the run's own choices
        self._off_only = 0.0  # the whole (unscaled) cost when gamma_max is 0
        self._excess = np.zeros((len(EXCESS_WINDOWS), 2))  # weighted excess, weight

    def prefilled(self, rids: list[int], tokens: list[int], decode_step: bool) -> None:
        """Prompt chunks of ``rids`` ran this step (a decode step, or a prefill-only
        one); the first chunk of a stay sets its key (a subset of the lag: lower)."""
        if not self.skip:
            return  # nothing to rebuild: the program never reads them
        key = float(self.t) if decode_step else self.t - 0.5
        begins = self.t + (1 if decode_step else 0)
        prompt_at, prompt_tokens, start = self.prompt_at, self.prompt_tokens, self.start
        for rid, chunk in zip(rids, tokens, strict=True):
            if prompt_at[rid] < 0:
                prompt_at[rid] = key
                # Only the stay's first chunk: a later one may run with the draft.
                prompt_tokens[rid] = chunk
            start[rid] = begins

    def left(self, rids: np.ndarray | int) -> None:
        """Requests that finished or were preempted: a later stay starts afresh."""
        self.prompt_at[rids] = -1.0

    def step(self, *, rids: np.ndarray, remaining: np.ndarray,
             speculates: np.ndarray | None, gammas: np.ndarray | int, mean_ctx: float,
             prefill_tokens: int, draft_loaded: bool, sync: bool, overhead_s: float,
             step_s: float, switch_s: float) -> None:
        """One decode step: ``speculates`` None where every request may speculate,
        ``gammas`` an int where every request ran the same length."""
        n = len(rids)
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
        diff, prompt = cached
        fixed = prompt[top]
        c = self._chunk
        c.batch.append(n)
        c.top.append(top)
        c.fixed.append(fixed)
        c.diff.append(diff)
        c.overhead.append(overhead_s)
        # The gamma that ran is priced as it ran (the cache's context is rounded): the
        # run's own schedule then costs the program what it cost the engine.
        c.own.append(step_s - switch_s - fixed if uniform else math.nan)
        c.rid.append(rids)
        c.remaining.append(remaining)
        c.gamma.append(gammas)
        c.speculates.append(speculates)
        if speculates is not None:
            c.restricted = True
        if not uniform or top != self.gamma_max:
            c.varied = True
        if self.skip:
            c.start.append(self.start[rids])
            c.key.append(self.prompt_at[rids])
            c.prompt.append(self.prompt_tokens[rids])
        self._own_s += n * step_s
        c.n += 1
        self.t += 1
        if c.n == bound.CHUNK:
            self._flush()

    def _price(self, key: tuple[int, int, int, int, bool], n: int, n_spec: int,
               prefill_tokens: int, draft_loaded: bool, sync: bool
               ) -> tuple[np.ndarray, list[float]]:
        """Per gamma: the step's whole price less the target's part of its prompt work,
        and that part.

        The step's decode part (per batch, context and residency) and its prompt part
        (per batch and prompt tokens) are priced apart, the first memoised: what
        ``StepPricer.price`` adds up, in its order, so the sum is its total bit for bit."""
        dkey = (key[0], key[1], key[2], draft_loaded)
        decode = self._decode.get(dkey)
        if decode is None:
            decode = self._decode[dkey] = self._decode_prices(key, n, n_spec, draft_loaded, sync)
        if not prefill_tokens:
            return decode, [0.0] * (self.gamma_max + 1)
        total = np.empty(self.gamma_max + 1)
        prompt = np.empty(self.gamma_max + 1)
        prompt_s = self._pricer.prompt_s
        for g in range(self.gamma_max + 1):
            k = g if n_spec else 0
            # Gamma 0 as the run had it; speculating needs the draft.
            draft_runs = (draft_loaded if g == 0 else True) and (k > 0 or sync)
            prompt[g], full = prompt_s(n, n + g * n_spec, prefill_tokens, draft_runs)
            total[g] = decode[g] + full
        return np.subtract(total, prompt), prompt.tolist()

    def _decode_prices(self, key: tuple[int, int, int, int, bool], n: int, n_spec: int,
                       draft_loaded: bool, sync: bool) -> np.ndarray:
        """Per gamma: the step's price without prompt work, at the cache's context."""
        out = np.empty(self.gamma_max + 1)
        ctx = (key[2] + 0.5) * PRICE_CONTEXT_QUANTUM
        price = self._pricer.price
        for g in range(self.gamma_max + 1):
            # Gamma 0 as the run had it (no draft: no sync forward); speculating needs
            # the draft.
            loaded = draft_loaded if g == 0 else True
            g_max = g if n_spec else 0
            out[g] = price(n, g_max, g * n_spec, ctx, 0, loaded, sync)[0]
        return out

    def _tokens_of(self, c: Chunk, offsets: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per step of the chunk: expected emitted tokens per gamma, those of the gamma
        each request ran, and each request's step index."""
        m, g_max = c.n, self.gamma_max
        starts = offsets[:m]
        reach = np.take(self._reach, np.concatenate(c.rid), axis=1)
        # A request emits at most what it has left, and drafts nothing where it may not
        # speculate: its reach beyond that is 0 (a few requests a step).
        cap = np.concatenate(c.remaining) - 1
        if c.restricted:
            cap[~c.speculating()] = 0
        short = np.flatnonzero(cap < g_max)
        reach[:, short] *= self._g_all[:, None] <= cap[short][None, :]
        # sum_{j <= g} reach_j: per step (of the sums over its requests), and per request.
        tokens = np.cumsum(np.add.reduceat(reach, starts, axis=1), axis=0).T
        # Row by row: cumsum along this short axis is ~4x slower, same sums.
        if c.varied:
            per = reach.copy()
            for g in range(1, g_max + 1):
                per[g] += per[g - 1]
            ran = per[np.minimum(c.gammas(), g_max), np.arange(per.shape[1])]
        else:
            ran = reach[0].copy()
            for g in range(1, g_max + 1):
                ran += reach[g]
        played = np.add.reduceat(ran, starts)
        step_of = np.repeat(np.arange(m), np.diff(offsets))
        return tokens, played, step_of

    def _rebuild(self, c: Chunk, step_of: np.ndarray) -> np.ndarray:
        """Per step of the chunk: seconds to rebuild the draft after a gamma-0 stretch
        of 0..MAX_STRETCH steps: one token per request per stretch step it decoded,
        and the prompts prefilled since the stretch began."""
        m, cap = c.n, MAX_STRETCH
        first = self.t - m
        ages = np.minimum(np.maximum(first + step_of - np.concatenate(c.start), 0), cap)
        # ge[i, k] = requests of step i that decoded in at least k of the stretch's steps.
        counts = np.bincount(step_of * (cap + 1) + ages, minlength=m * (cap + 1))
        ge = np.cumsum(counts.reshape(m, cap + 1)[:, ::-1], axis=1)[:, ::-1]
        decoded = np.zeros((m, cap + 1))
        decoded[:, 1:] = np.cumsum(ge[:, 1:], axis=1)
        keys = np.concatenate(c.key)
        has = keys >= 0
        t_of = (first + step_of[has]).astype(np.float64)
        lmin = np.minimum(np.floor(t_of - keys[has]).astype(np.int64), cap + 1)
        weights = np.concatenate(c.prompt)[has]
        prompt = np.bincount(step_of[has] * (cap + 2) + lmin, weights=weights,
                             minlength=m * (cap + 2)).reshape(m, cap + 2)[:, : cap + 1]
        out: np.ndarray = self.rate * (decoded + np.cumsum(prompt, axis=1))
        return out

    def _flush(self) -> None:
        c = self._chunk
        m = c.n
        if not m:
            return
        self._chunk = Chunk()
        tokens, played, step_of = self._tokens_of(c, c.offsets())
        fixed, batch = np.asarray(c.fixed), np.asarray(c.batch, dtype=np.float64)
        per_token, weight = per_token_prices(batch, played, c.prices(), tokens, fixed)
        self._tokens += float(played.sum())
        if self.gamma_max == 0:
            self._off_only += float((weight * per_token[:, 0]).sum())
        else:
            rebuild = self._rebuild(c, step_of) if self.skip else None
            self._program.walk(*program_costs(weight, per_token, tokens, rebuild))
        # The excess of each step's chosen gamma over its cheapest (rebuilds aside).
        top = np.minimum(np.asarray(c.top), self.gamma_max)
        chosen = per_token[np.arange(m), top]
        excess = chosen / per_token.min(axis=1) - 1.0
        first = self.t - m
        for k, (lo, hi) in enumerate(EXCESS_WINDOWS):
            a = max(lo - first, 0)
            b = m if hi is None else min(hi - first, m)
            if a < b:
                self._excess[k, 0] += float(np.dot(weight[a:b], excess[a:b]))
                self._excess[k, 1] += float(weight[a:b].sum())

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
