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

The recorder keeps none of this per request and step. It keeps sums over the decoding
requests, updated as they join and leave the batch (in fixed point, so that adding and
taking away is exact and the sums do not depend on order): per gamma, the tokens they
are expected to emit, and in skip mode two rings indexed by decode step, of when
each began decoding and when its prompt ran. A step copies those (less the few
requests whose output ends within gamma tokens) into a chunk of steps
(:data:`nightjar.sim.bound.CHUNK`), which is priced with numpy at once and walked
through the program (:mod:`nightjar.sim.bound`), so its memory is one chunk whatever
the run's length. The program's costs are kept unscaled: every step's weight shares
one divisor, the run's expected tokens, known only at the end, and one common factor
changes no choice.
"""

from __future__ import annotations

import math

import numpy as np

from nightjar.core.powers import powers
from nightjar.profile.profile import Profile
from nightjar.sim import bound
from nightjar.sim.bound import MAX_STRETCH, Program, per_token_prices
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

    The engine tells it when a request starts decoding (:meth:`joined`), leaves the
    batch (:meth:`left`) and had a prompt chunk run (:meth:`prefilled`), and calls
    :meth:`step` once per decode step, before the step's outcome is applied (so the
    decoding requests it holds sums over are exactly the step's). Per request it
    keeps the decode step its current stay began decoding at and when its prompt was
    prefilled (in half steps: a V0 prefill-only step sits between two decode steps),
    so the rebuild a stretch would need can be counted at each step.

    Invariant: ``_sum[g]`` is, over the requests that joined and have not left, the
    fixed-point sum of ``_cum[rid, g]`` (the tokens beyond the first that gamma g is
    expected to emit for the request); in skip mode ``_starts[s % W]`` counts those
    that began decoding at step s, and ``_prompts[q % W]`` sums the first prompt chunk
    of those whose prompt ran at step q, for s and q within the last W steps.
    """

    def __init__(self, profile: Profile, gamma_max: int, skip: bool, positional_decay: float,
                 positional: bool, alpha: np.ndarray, no_spec: np.ndarray | None = None,
                 max_batch: int = 256) -> None:
        self.profile = profile
        self.gamma_max = gamma_max
        self.skip = skip
        self.rate = rebuild_rate_s(profile) if skip else 0.0
        self.decay = positional_decay if positional else 1.0
        # Each request's reach: the chance that its j-th draft is emitted,
        # a^j decay^(j (j - 1) / 2), computed once (its acceptance rate never changes).
        a = np.clip(alpha, 0.0, 0.999)
        reach = np.vstack((np.ones_like(a), powers(a, gamma_max).T))
        if self.decay != 1.0:  # a scalar's pow is the C library's on every CPU
            reach *= np.array([self.decay ** (k * (k - 1) // 2) for k in range(gamma_max + 1)]
                              )[:, None]
        # In fixed point, with room for a whole batch's sum of every gamma's tokens.
        bits = min(52, 62 - (max(max_batch, 1) * max(gamma_max, 1)).bit_length())
        self._unit = 2.0 ** -bits
        fixed_point = np.rint(reach[1:] * 2.0 ** bits).astype(np.int64)
        if no_spec is not None:
            fixed_point[:, no_spec] = 0  # it drafts nothing: one token a step
        num_requests = int(alpha.shape[0])
        self._cum = np.zeros((num_requests, gamma_max + 1), dtype=np.int64)
        np.cumsum(fixed_point.T, axis=1, out=self._cum[:, 1:])
        self._sum = np.zeros(gamma_max + 1, dtype=np.int64)
        # Per request, read and written one at a time: Python sequences (a numpy
        # scalar access costs several times a list's).
        self._in = bytearray(num_requests)  # 1 while it decodes
        self.t = 0  # decode steps so far
        self.start = [0] * num_requests  # first decode step of the stay
        self.prompt_at = [-1.0] * num_requests  # half-step key of the prefill
        self.prompt_tokens = [0] * num_requests
        self._window = MAX_STRETCH + 1
        # Both rings in one table, so a step copies them at once.
        self._rings = np.zeros((2, self._window), dtype=np.int64)
        self._starts, self._prompts = self._rings
        # Per step shape: (price less the prompt work, the prompt work) per gamma.
        self._prices: dict[tuple[int, int, int, int, bool], tuple[np.ndarray, list[float]]] = {}
        self._decode: dict[tuple[int, int, int, bool], np.ndarray] = {}
        self._prompt: dict[tuple[int, int, int, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._pricer = StepPricer(profile)  # the engine's prices, bit for bit, memoised
        self._chunk = Chunk(bound.CHUNK, gamma_max, self._window, skip)
        self._program = Program()
        self._own_s = 0.0  # sum over steps of B_t * step_s
        self._tokens = 0.0  # expected tokens of the run's own choices
        self._off_only = 0.0  # the whole (unscaled) cost when gamma_max is 0
        self._excess = np.zeros((len(EXCESS_WINDOWS), 2))  # weighted excess, weight

    def prefilled(self, rids: list[int], tokens: list[int], decode_step: bool) -> None:
        """Prompt chunks of ``rids`` ran in the step just recorded (a decode step), or
        in a prefill-only one before the next; the first chunk of a stay sets its key
        (a subset of the lag: lower)."""
        if not self.skip:
            return  # nothing to rebuild: the program never reads them
        key = self.t - (1.0 if decode_step else 0.5)
        begins = self.t
        prompt_at, prompt_tokens, start = self.prompt_at, self.prompt_tokens, self.start
        for rid, chunk in zip(rids, tokens, strict=True):
            if prompt_at[rid] < 0:
                prompt_at[rid] = key
                # Only the stay's first chunk: a later one may run with the draft.
                prompt_tokens[rid] = chunk
            start[rid] = begins

    def joined(self, rid: int) -> None:
        """``rid`` finished its prefill: it decodes from the next step on."""
        self._in[rid] = 1
        self._sum += self._cum[rid]
        if self.skip:
            self._ring(rid, 1)

    def left(self, rids: np.ndarray | int) -> None:
        """Requests that finished or were preempted: a later stay starts afresh."""
        for rid in rids.tolist() if isinstance(rids, np.ndarray) else (rids,):
            if self._in[rid]:
                self._in[rid] = 0
                self._sum -= self._cum[rid]
                if self.skip:
                    self._ring(rid, -1)
            self.prompt_at[rid] = -1.0

    def _ring(self, rid: int, sign: int) -> None:
        """Count a decoding request into (or out of) the rings, where still in them."""
        oldest = self.t - self._window
        began = self.start[rid]
        if began > oldest:
            self._starts[began % self._window] += sign
        key = self.prompt_at[rid]
        if key >= 0:  # (a chunk before the first decode step has key -0.5: none)
            ran = math.ceil(key)
            if ran > oldest:
                self._prompts[ran % self._window] += sign * self.prompt_tokens[rid]

    def step(self, *, rids: np.ndarray, neg_left: np.ndarray,
             speculates: np.ndarray | None, gammas: np.ndarray | int, mean_ctx: float,
             prefill_tokens: int, draft_loaded: bool, sync: bool, overhead_s: float,
             step_s: float, switch_s: float) -> None:
        """One decode step, before its outcome: ``rids`` the decoding requests,
        ``neg_left`` minus the tokens each has left, ``speculates`` None where every
        request may speculate, ``gammas`` an int where every request ran the same length."""
        n = rids.shape[0]
        g_max = self.gamma_max
        c = self._chunk
        i = c.n
        c.reach[i] = self._sum
        # A request with at most gamma tokens left emits no more than those: noted
        # here (a few a step), taken off the sums when the chunk is priced.
        near = (neg_left >= -g_max).nonzero()[0]
        if near.size:
            c.near_rid.extend(rids[near].tolist())
            c.near_left.extend(neg_left[near].tolist())
            c.near_step.extend([i] * near.size)
        n_spec = n if speculates is None else int(speculates.sum())
        if isinstance(gammas, int):
            top, uniform, ran, played = gammas, True, gammas, 0
        else:
            top = int(gammas.max()) if gammas.size else 0
            spec_g = gammas if speculates is None or n_spec == n else gammas[speculates]
            uniform = bool(gammas.size) and (not n_spec or int(spec_g.min()) == int(spec_g.max()))
            lengths = np.minimum(np.minimum(gammas, g_max), -neg_left - 1)
            ran, played = -1, int(self._cum[rids, lengths].sum())
        key = (n, n_spec, int(mean_ctx) // PRICE_CONTEXT_QUANTUM, prefill_tokens, draft_loaded)
        cached = self._prices.get(key)
        if cached is None:
            cached = self._price(key, n, n_spec, prefill_tokens, draft_loaded, sync)
            self._prices[key] = cached
        diff, prompt = cached
        fixed = prompt[top]
        c.batch.append(n)
        c.t.append(self.t)
        c.top.append(top)
        c.ran.append(ran)
        c.played.append(played)
        c.fixed.append(fixed)
        c.diff.append(diff)
        c.overhead.append(overhead_s)
        # The gamma that ran is priced as it ran (the cache's context is rounded): the
        # run's own schedule then costs the program what it cost the engine.
        c.own.append(step_s - switch_s - fixed if uniform else math.nan)
        if self.skip:
            c.rings[i] = self._rings
        self._own_s += n * step_s
        c.n += 1
        self.t += 1
        if self.skip:  # the ring's oldest slot becomes the new step's
            slot = self.t % self._window
            self._rings[:, slot] = 0
        if c.n == c.reach.shape[0]:
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
        pkey = (n, n_spec, prefill_tokens, draft_loaded)
        parts = self._prompt.get(pkey)
        if parts is None:
            parts = self._prompt[pkey] = self._prompt_prices(n, n_spec, prefill_tokens,
                                                             draft_loaded, sync)
        prompt, full = parts
        return np.subtract(decode + full, prompt), prompt.tolist()

    def _prompt_prices(self, n: int, n_spec: int, prefill_tokens: int, draft_loaded: bool,
                       sync: bool) -> tuple[np.ndarray, np.ndarray]:
        """Per gamma: the target's part of the step's prompt work, and the whole of it
        (the draft's prefill too where it runs)."""
        prompt = np.empty(self.gamma_max + 1)
        full = np.empty(self.gamma_max + 1)
        prompt_s = self._pricer.prompt_s
        for g in range(self.gamma_max + 1):
            k = g if n_spec else 0
            # Gamma 0 as the run had it; speculating needs the draft.
            draft_runs = (draft_loaded if g == 0 else True) and (k > 0 or sync)
            prompt[g], full[g] = prompt_s(n, n + g * n_spec, prefill_tokens, draft_runs)
        return prompt, full

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
            out[g] = price(n, g_max, g * n_spec, ctx, 0, loaded, sync).total_s
        return out

    def _tokens_of(self, c: Chunk) -> tuple[np.ndarray, np.ndarray]:
        """Per step of the chunk: expected emitted tokens per gamma, and those of the
        gammas its requests ran."""
        m = c.n
        batch = np.asarray(c.batch, dtype=np.float64)
        reach = c.reach[:m]
        if c.near_rid:
            # Gamma g emits min(g, left - 1) drafts of a request with ``left`` to go.
            cum = self._cum[c.near_rid]
            caps = np.minimum(-1 - np.asarray(c.near_left), self.gamma_max)
            cut = cum - np.minimum(cum, cum[np.arange(caps.size), caps][:, None])
            np.subtract.at(reach, np.asarray(c.near_step), cut)
        tokens = reach * self._unit
        tokens += batch[:, None]
        ran = np.asarray(c.ran)
        played = tokens[np.arange(m), np.minimum(ran, self.gamma_max)]
        varied = np.flatnonzero(ran < 0)
        if varied.size:
            played[varied] = batch[varied] + np.asarray(c.played)[varied] * self._unit
        return tokens, played

    def _rebuild_s(self, c: Chunk, i: int, stretch: int) -> float:
        """Seconds to rebuild the draft at step ``i`` of the chunk after a gamma-0
        stretch of ``stretch`` (<= MAX_STRETCH) steps: one token per request per
        stretch step it decoded, and the prompts prefilled since the stretch began."""
        back = (c.t[i] - np.arange(stretch + 1)) % self._window  # ring slots, d steps back
        # A request that began decoding d < stretch steps back decoded d of them.
        began = c.rings[i, 0, back[:stretch]]
        decoded = stretch * c.batch[i] - int(np.dot(stretch - np.arange(stretch), began))
        prompt = int(c.rings[i, 1, back].sum())
        return self.rate * float(decoded + prompt)

    def _walk(self, c: Chunk, weight: np.ndarray, per_token: np.ndarray,
              tokens: np.ndarray) -> None:
        """The chunk's steps through the program: gamma 0 costs ``off``, speculating
        the cheapest gamma, plus in skip mode the rebuild after a stretch, per token
        of that gamma (:func:`nightjar.sim.bound.program_costs`, element by element)."""
        cost = weight[:, None] * per_token
        off = cost[:, 0].tolist()
        if not self.skip:
            on0 = cost[:, 1:].min(axis=1).tolist()
            self._program.walk(off, on0, lambda i, _: on0[i])
            return
        inv = 1.0 / tokens[:, 1:]
        m = c.n
        # Right after a speculating step only a prompt run in this very step (V0) is
        # missing from the draft.
        now = c.rings[np.arange(m), 1, np.asarray(c.t) % self._window]
        scaled = weight * (self.rate * (0.0 + now))
        on = cost[:, 1] + scaled * inv[:, 0]
        for g in range(1, inv.shape[1]):
            np.minimum(on, cost[:, g + 1] + scaled * inv[:, g], out=on)

        def on_at(i: int, stretch: int) -> float:  # (rare: the rows are read here)
            scaled = float(weight[i]) * self._rebuild_s(c, i, stretch)
            row, inv_i = cost[i].tolist(), inv[i].tolist()
            best: float = row[1] + scaled * inv_i[0]
            for g in range(1, len(inv_i)):
                best = min(best, row[g + 1] + scaled * inv_i[g])
            return best

        self._program.walk(off, on.tolist(), on_at)

    def _flush(self) -> None:
        c = self._chunk
        m = c.n
        if not m:
            return
        tokens, played = self._tokens_of(c)
        fixed, batch = np.asarray(c.fixed), np.asarray(c.batch, dtype=np.float64)
        per_token, weight = per_token_prices(batch, played, c.prices(), tokens, fixed)
        self._tokens += float(played.sum())
        if self.gamma_max == 0:
            self._off_only += float((weight * per_token[:, 0]).sum())
        else:
            self._walk(c, weight, per_token, tokens)
        # The excess of each step's chosen gamma over its cheapest (rebuilds aside).
        top = np.minimum(np.asarray(c.top), self.gamma_max)
        chosen = per_token[np.arange(m), top]
        excess = chosen / per_token.min(axis=1) - 1.0
        first = c.t[0]
        c.clear()
        for k, (lo, hi) in enumerate(EXCESS_WINDOWS):
            a = max(lo - first, 0)
            b = m if hi is None else min(hi - first, m)
            if a < b:
                # Not np.dot: BLAS sums in an order of its CPU's choosing, so a run's
                # figures would differ in their last bits from one machine to another.
                self._excess[k, 0] += float((weight[a:b] * excess[a:b]).sum())
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
