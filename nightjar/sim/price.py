"""What one engine step costs, from its composition and the profile: the simulator's
price function, shared by the engine and by ``nightjar validate`` (which replays each
live step's composition through it).

A step runs ``n`` decoding requests (speculating up to ``g_max``, ``drafted`` tokens
in all) and ``prefill_tokens`` prompt tokens in one forward:

- decode: the profile's decode table at (n, gamma, mean context), the verify part
  interpolated between integer gammas when requests speculate different lengths;
- the draft's sync forward at gamma 0 when a draft is loaded (``--draft-kv sync``);
- the prompt tokens: with a mixed-step table (measured profiles), what they add on
  top of the ``n + drafted`` decode tokens as measured; otherwise what they add on the
  prefill curve, ``prefill(base + p) - prefill(base)``; a step with no decode pays
  the prefill curve itself; the draft, when it runs in this step (the K it proposes
  for the prompts, ``prompt_gamma``, is > 0, or ``sync``), prefills the same tokens,
  and in a prefill-only step it then drafts K - 1 more tokens for every prompt that
  completes (vLLM's draft proposer runs its K passes at the end of the step that
  emits a request's first token: that is in its TTFT); those passes cost what the
  decode table's draft adds from gamma 1 to K at that batch;
- the switch: the draft's catch-up over ``lag`` tokens (``--draft-kv skip``);
- the wake: what the first step after ``idle_s`` seconds of an idle engine adds
  (the profile's optional ``wake`` table, :meth:`Profile.wake_s`): an engine that
  has served nothing for a while starts its next step slow, which no back-to-back
  measurement of the other tables sees.

Lookups outside a table are priced at its edge, or past its largest batch along its last
segment (:mod:`nightjar.profile.profile`); ``off_grid`` says so, for the count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nightjar.profile.prefill import chunked_prefill_s
from nightjar.profile.profile import Profile


@dataclass(frozen=True, slots=True)
class StepShape:
    n_decode: int
    g_max: int
    drafted: int  # draft tokens over the decoding requests (n * g_max when uniform)
    mean_ctx: float
    prefill_tokens: int
    draft_loaded: bool  # the draft's weights are resident
    sync: bool  # the draft runs at gamma 0 (vLLM's K = 0 pass) when loaded
    lag_tokens: int = 0  # draft KV to rebuild before speculating (skip mode)
    # The K the draft proposes at the end of this step, for the prompts it prefills
    # (None: g_max). Live it is the K verified one step later; in a prefill-only step
    # the simulator asks the policy for it, as vLLM's scheduler does.
    prompt_gamma: int | None = None
    prompts_done: int = 0  # requests whose prefill completes in this step
    idle_s: float = 0.0  # the engine was idle this long before the step (inf: first)


@dataclass(frozen=True, slots=True)
class StepPrice:
    total_s: float
    decode_s: float  # decode table (draft + verify + overheads) and the sync forward
    prefill_s: float  # the prompt tokens, target and draft
    switch_s: float
    draft_prefilled: bool  # the draft ran over the prompt tokens
    off_grid: bool  # some lookup was priced at a table's edge
    wake_s: float = 0.0  # what waking the idle engine added


def price_step(profile: Profile, shape: StepShape) -> StepPrice:
    return StepPricer(profile).price(
        shape.n_decode, shape.g_max, shape.drafted, shape.mean_ctx, shape.prefill_tokens,
        shape.draft_loaded, shape.sync, shape.lag_tokens, shape.prompt_gamma,
        shape.prompts_done, shape.idle_s,
    )


class StepPricer:
    """:func:`price_step` for one profile, for an engine that prices every step.

    The prefill curves are pure functions of a token count, so their chunked values
    are memoised (a simulation asks for the same few thousand counts again and
    again); the rest is the same arithmetic in the same order, so a price is
    identical to the bare function's, bit for bit.
    """

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self._chunk = profile.max_prefill_tokens
        self._has_mixed = profile.has_mixed
        self._b_lo, self._b_hi = profile.min_batch_size, profile.max_batch_size
        self._c_lo, self._c_hi = profile.min_context_len, profile.max_context_len
        self._target: dict[int, float] = {}
        self._draft: dict[int, float] = {}
        self._wake_from = profile.wake_from_s

    def _curve(self, memo: dict[int, float], time_s: Callable[[int], float], tokens: int) -> float:
        hit = memo.get(tokens)
        if hit is None:
            hit = memo[tokens] = chunked_prefill_s(time_s, tokens, self._chunk)
        return hit

    def _added(self, memo: dict[int, float], time_s: Callable[[int], float], base: int,
               tokens: int) -> float:
        # added_s, on the memoised curve.
        if base <= 0:
            return self._curve(memo, time_s, tokens)
        added = self._curve(memo, time_s, base + tokens) - self._curve(memo, time_s, base)
        return max(added, 0.0)

    def price(
        self, n: int, g_max: int, drafted: int, mean_ctx: float, p: int,
        draft_loaded: bool, sync: bool, lag_tokens: int = 0,
        prompt_gamma: int | None = None, prompts_done: int = 0, idle_s: float = 0.0,
    ) -> StepPrice:
        """:func:`price_step` with the shape's fields as arguments (no shape built)."""
        profile = self.profile
        decode_s = switch_s = prefill_s = 0.0
        off_grid = False
        if n:
            ctx = mean_ctx
            # profile.off_grid(n, ctx), inlined: a NaN context is off the grid too.
            off_grid = not (self._b_lo <= n <= self._b_hi and self._c_lo <= ctx <= self._c_hi)
            g_mean = drafted / n
            if g_mean >= g_max:  # decode_time_s's uniform case: the table's step time
                decode_s = profile.step_time_s(n, g_max, ctx)
            else:
                decode_s = decode_time_s(profile, n, g_max, g_mean, ctx)
            if g_max > 0:
                if lag_tokens:
                    switch_s = self._curve(self._draft, profile.draft_prefill_time_s, lag_tokens)
            elif draft_loaded and sync:
                decode_s += profile.draft_forward_s(n, ctx)
        draft_prefilled = False
        if p:
            base = n + drafted
            if n and self._has_mixed:
                off_grid = off_grid or profile.mixed_off_grid(base)
            k = g_max if prompt_gamma is None else prompt_gamma
            draft_prefilled = draft_loaded and (k > 0 or sync)
            prefill_s = self.prompt_s(n, base, p, draft_prefilled)[1]
            if draft_prefilled and not n and k > 1 and prompts_done:
                prefill_s += _further_drafts_s(profile, prompts_done, k, p / prompts_done)
        total = decode_s + prefill_s + switch_s
        wake_s = 0.0
        if idle_s > self._wake_from:
            wake_s = profile.wake_s(idle_s)
            total += wake_s
        # Positional, in the field order (keywords cost more on the hot path).
        return StepPrice(total, decode_s, prefill_s, switch_s, draft_prefilled, off_grid, wake_s)

    def prompt_s(self, n: int, base: int, p: int, draft_runs: bool) -> tuple[float, float]:
        """``p`` prompt tokens in a forward of ``base`` other tokens (``n`` of them
        decoding): the target's seconds, and those with the draft's prefill when it
        runs over them (in a prefill-only step, before its further passes)."""
        profile = self.profile
        if n and self._has_mixed:
            target = profile.mixed_added_s(base, p)
        else:
            target = self._added(self._target, profile.prefill_time_s, base, p)
        if not draft_runs:
            return target, target
        return target, target + self._added(self._draft, profile.draft_prefill_time_s, base, p)


def _further_drafts_s(profile: Profile, batch: int, k: int, ctx: float) -> float:
    """The draft's passes 2..K over ``batch`` requests: what its table adds from gamma 1
    to gamma K (the first pass is the prompt's prefill, priced on the prefill curve)."""
    k = min(k, profile.gamma_max)
    if k < 2:
        return 0.0
    first = profile.decode_timing(batch, 1, ctx).draft_s
    return max(profile.decode_timing(batch, k, ctx).draft_s - first, 0.0)


def decode_time_s(profile: Profile, n: int, g_max: int, g_mean: float, mean_ctx: float) -> float:
    """A decode step of ``n`` requests speculating ``g_mean`` on average, ``g_max`` at most.

    The draft runs g_max sequential passes, while the verifier's work follows the mean
    length: verify is interpolated between the neighbouring integer gammas.
    """
    timing = profile.decode_timing(n, g_max, mean_ctx)
    if g_mean >= g_max:
        return timing.step_s
    lo = int(g_mean)
    frac = g_mean - lo
    v_lo = profile.decode_timing(n, lo, mean_ctx).verify_s
    v_hi = profile.decode_timing(n, lo + 1, mean_ctx).verify_s if frac else v_lo
    overhead = timing.step_s - timing.draft_s - timing.verify_s
    return timing.draft_s + v_lo + frac * (v_hi - v_lo) + overhead


def added_s(time_s: Callable[[int], float], base: int, tokens: int, chunk: int) -> float:
    """What ``tokens`` prompt tokens add to a forward already running ``base`` tokens,
    by the profile's prefill curve (chunked beyond its largest measured size)."""
    if base <= 0:
        return chunked_prefill_s(time_s, tokens, chunk)
    added = chunked_prefill_s(time_s, base + tokens, chunk) - chunked_prefill_s(time_s, base, chunk)
    return max(added, 0.0)
