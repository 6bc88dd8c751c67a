"""``nightjar+``: ours. Predict each gamma's per-token latency; learn what the model misses.

Where ``nightjar`` learns every (batch bucket, gamma) loss from scratch and spends
a fixed share of its steps exploring, ``nightjar+`` predicts the loss of every
gamma and learns only the prediction's error:

    loss(B, c, g) = T(B, g, c) / tau(g) * ratio[bucket(B), bucket(c)][g]  (+ switch penalty)

- ``T``: the profile's step time when one exists (a prior), else step times
  learned online per bucket (:mod:`nightjar.policies.step_times`);
- ``tau(g)``: expected tokens per request, from per-gamma effective acceptance
  rates recovered by inverting the observed accepted drafts
  (:class:`nightjar.core.estimators.EffectiveAcceptance`), so a batch of unequal rates is
  priced right at every gamma;
- buckets: (batch-size bucket, context bucket) of the batch's mean context
  (:func:`nightjar.core.estimators.context_bucket_of`): at long contexts a decode step is
  KV-bound even at large batches (MagicDec, arXiv 2408.11049), so the profile's
  error and the learned step times differ by context as much as by batch size;
- ``ratio``: per bucket and gamma, observed over predicted step cost (a ratio of
  EMAs), correcting the profile where it is wrong. It learns only from pure
  decode steps (``prefill_tokens == 0``); a mixed step's excess over the
  predicted decode trains the prefill cost (:class:`nightjar.core.estimators.PrefillCost`)
  instead, which the profile-less step times subtract. A new bucket starts from
  its nearest neighbour's ratios;
- switch cost: turning speculation on pays C_switch, learned per missed token (the
  draft must re-read what it skipped) and predicted from the tokens emitted since
  speculation stopped, capped at the running requests' contexts; turning it off
  commits to a later rebuild, priced at the average observed C_switch; each
  amortised over the typical length of the run (speculating, or not) that the
  toggle starts;
- exploration: with probability ``EXPLORE`` a neighbouring gamma of the best
  (toggling speculation explores 4x less often, and much less when the rebuild
  is dear, since one exploring step pays all of it; with a drafter that keeps no
  KV, ``PolicyEnv.drafter`` n-gram or suffix, a toggle is free and explored like
  any neighbour); a 2% hysteresis keeps the current arm against near-ties;
- objective and KV pressure (:mod:`nightjar.policies.objective`): with ``nightjar+:kv-limit``
  lengths whose lookahead the free blocks cannot hold are never chosen (off by
  default: measured, it costs more than it saves); ``nightjar+:slo`` trades per-token
  latency below the TPOT limit for shorter steps while requests wait for one.
Every estimate is an EMA, so the policy forgets and follows non-stationary loads.
"""

from __future__ import annotations

import random
from collections import deque

from nightjar.core.drafter import drafter_kind
from nightjar.core.estimators import EffectiveAcceptance, PrefillCost
from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.policies.objective import Objective, lookahead_top, parse_objective, slo_choice
from nightjar.policies.registry import register
from nightjar.policies.step_times import Bucket, OnlineTimes, ProfileTimes, bucket_key, nearest

EXPLORE = 0.01
HYSTERESIS = 0.02
RATIO_ALPHA = 0.1
RATIO_PRIOR = 20.0  # evidence units (full steps) before the profile is half-overruled
ACCEPT_ALPHA = 0.05
SWITCH_ALPHA = 0.3
RUN_ALPHA = 0.2
INITIAL_ALPHA = 0.6  # acceptance before any evidence, unless the env has a prior
INITIAL_RUN = 64.0  # steps a speculation run is assumed to last before one is seen
# A step with this many requests counts as a full observation; smaller ones less.
EVIDENCE_BATCH = 16


class NightjarPlusPolicy:
    name = "nightjar+"

    def __init__(
        self,
        env: PolicyEnv,
        objective: Objective | None = None,
        *,
        by_context: bool = True,
        kv_limit: bool = False,
    ) -> None:
        self.objective = objective if objective is not None else Objective()
        # False: every estimate keyed on the batch bucket alone (the ablation).
        self.by_context = by_context
        # Opt-in (``nightjar+:kv-limit``): on the overloaded ShareGPT/A100 runs the
        # limit toggled speculation ~220 times a minute and cost 3% throughput, since
        # the preemption it avoids (of the newest, shortest request) is cheaper than
        # the speculation it gives up; it changed nothing on the other bundled runs.
        self.kv_limit = kv_limit
        self.arms = env.gamma_max + 1
        self._rng = random.Random(env.seed)
        self._profiled = env.latency is not None
        self._times = (
            ProfileTimes(env.latency, env.gamma_max)
            if env.latency is not None
            else OnlineTimes(env.gamma_max, by_context)
        )
        prior = env.acceptance_prior if env.acceptance_prior is not None else INITIAL_ALPHA
        self._acc = EffectiveAcceptance(env.gamma_max, prior, ACCEPT_ALPHA, EVIDENCE_BATCH)
        self._ratio: dict[Bucket, list[float]] = {}
        self._prefill = PrefillCost()
        self._sums: dict[Bucket, tuple[list[float], list[float], list[float]]] = {}
        # (context length, lag that a rebuild would re-read) of decisions whose
        # outcome has not arrived.
        self._pending: deque[tuple[float, float]] = deque(maxlen=8)
        self._current = 0
        self._switch_rate = 0.0  # seconds of rebuild per token missed while off
        self._switch_avg = 0.0  # seconds per observed rebuild
        self._lag = 0  # tokens emitted since speculation last ran
        self._run = 0  # length of the current speculation run, in steps
        self._run_len = INITIAL_RUN
        self._off_run = 0  # length of the current gamma-0 run, in steps
        self._off_len = INITIAL_RUN
        self._off = False  # whether the last decision was gamma 0
        # A drafter without a KV cache of its own (n-gram, suffix) has nothing to
        # rebuild after gamma 0: toggling speculation costs nothing, so it is
        # explored as often as any other neighbour.
        self._free_toggle = not drafter_kind(env.drafter).has_kv

    @property
    def alpha(self) -> float:
        return self._acc.mean()

    def _ratios(self, c: Bucket) -> list[float]:
        r = self._ratio.get(c)
        if r is None:
            near = nearest(self._ratio, c)
            r = self._ratio[c] = list(self._ratio[near]) if near is not None else [1.0] * self.arms
        return r

    def losses(self, batch_size: int, context_len: float) -> list[float]:
        """Predicted per-token latency of every gamma, switch penalty included.

        The rebuild re-reads what the running requests emitted while the draft was
        off, which cannot exceed their contexts: after a long off-run under load the
        requests that were running then are mostly gone.
        """
        t = self._times.times(batch_size, context_len)
        r = self._ratios(bucket_key(batch_size, context_len, self.by_context))
        tau = self._acc.taus
        out = [t[g] / tau[g] * r[g] for g in range(self.arms)]
        if self._off:
            # Turning on now pays the rebuild over every token the draft missed.
            cost = self._switch_rate * self._lag_now(batch_size, context_len)
            for g in range(1, self.arms):
                out[g] += cost / (self._run_len * tau[g])
        else:
            # Turning off commits to paying a rebuild when speculation comes back.
            out[0] += self._switch_avg / self._off_len
        return out

    def _lag_now(self, batch_size: int, context_len: float) -> float:
        return min(float(self._lag), batch_size * context_len)

    def decide(self, ctx: StepContext) -> int:
        self._pending.append(
            (ctx.mean_context_len, self._lag_now(ctx.batch_size, ctx.mean_context_len))
        )
        if not ctx.draft_resident:
            return self._chose(0)
        if not self._times.known(ctx.batch_size, 0):
            # Learning online, gamma 0 is measured first in every bucket: from the
            # speculating arm alone the line to gamma 0 is a guess (PRIOR_SLOPE),
            # optimistic where verification is compute-bound, and a toggle to 0 is
            # explored too rarely to correct it (issue 15: never stopped at B = 24).
            # A profile knows every arm (``known`` is always true), so this never fires.
            return self._chose(0)
        loss = self.losses(ctx.batch_size, ctx.mean_context_len)
        top = min(self.arms, ctx.gamma_max + 1)
        if self.kv_limit:
            top = lookahead_top(ctx, top)
        best = min(range(top), key=loss.__getitem__)
        pick = None
        if self.objective.slo is not None:
            t = self._times.times(ctx.batch_size, ctx.mean_context_len)
            r = self._ratios(bucket_key(ctx.batch_size, ctx.mean_context_len, self.by_context))
            pick = slo_choice(self.objective, ctx, loss, [t[g] * r[g] for g in range(top)], top)
        if pick is not None:
            # The SLO objective's choice: the per-token hysteresis below would keep the
            # current (per-token cheaper) arm against it every time.
            best = pick
        else:
            cur = self._current if self._current < top else best
            if loss[cur] <= loss[best] * (1.0 + HYSTERESIS):
                best = cur
        self._current = best
        u = self._rng.random()
        if u < EXPLORE:
            g = min(max(best + (1 if u < EXPLORE / 2 else -1), 0), top - 1)
            # A toggle costs a switch: explore it 4x less often, and much less when
            # it is dear. One exploring step pays the whole rebuild (not amortised
            # over a run), so its price is counted in steps.
            extra = max(loss[g] - loss[best], 0.0) / loss[best]
            if g > 0 and self._off:
                t_best = self._times.times(ctx.batch_size, ctx.mean_context_len)[best]
                lag = self._lag_now(ctx.batch_size, ctx.mean_context_len)
                extra += self._switch_rate * lag / t_best
            if (
                self._free_toggle
                or (g == 0) == (best == 0)
                or self._rng.random() * (1.0 + extra) ** 2 < 0.25
            ):
                return self._chose(g)
        return self._chose(best)

    def _chose(self, g: int) -> int:
        # The switch state is what the engine runs next, not the last outcome:
        # outcomes may trail decisions by a step, and pricing a toggle against a
        # stale state would make the policy flip back and forth.
        self._off = g == 0
        return g

    def observe(self, outcome: StepOutcome) -> None:
        g, b = outcome.gamma, outcome.batch_size
        ctx_len, lag = self._pending.popleft() if self._pending else (0.0, 0.0)
        if outcome.switch_cost_s > 0.0:
            self._switch_avg += SWITCH_ALPHA * (outcome.switch_cost_s - self._switch_avg)
            if lag > 0:
                per_token = outcome.switch_cost_s / lag
                self._switch_rate += SWITCH_ALPHA * (per_token - self._switch_rate)
        self._track_runs(g, outcome.emitted)
        if outcome.clamped or g >= self.arms or b <= 0 or outcome.emitted <= 0:
            return
        step_s = outcome.step_time_s - outcome.switch_cost_s
        if g > 0:
            self._acc.update(g, outcome.accepted, b)
        c = bucket_key(b, ctx_len, self.by_context)
        r = self._ratios(c)
        p = outcome.prefill_tokens
        if p > 0:
            # The decode part is predicted; the rest of a mixed step is prefill.
            if self._times.known(b, g, ctx_len):
                self._prefill.learn(p, step_s - self._times.times(b, ctx_len)[g] * r[g])
            if self._profiled:
                return  # the ratio learns from pure decode steps only
            decode_s = self._prefill.decode_time(step_s, p)
            # A prefill estimate at or above the whole step leaves no decode time to
            # learn from; learned as 0 it made every loss 0 (a division by zero in
            # decide, seen on longctx-mix with --prior none).
            if decode_s is not None and decode_s > 0.0:
                self._times.learn(b, g, decode_s, ctx_len)
            return
        if not self._profiled:
            self._times.learn(b, g, step_s, ctx_len)
            return
        num, den, ev = self._sums.setdefault(
            c, ([0.0] * self.arms, [0.0] * self.arms, [0.0] * self.arms)
        )
        # Ratio of weighted means (observed over predicted seconds), not a mean of
        # ratios; a small batch's step is noisy, so it carries less evidence. The
        # ratio is shrunk toward 1 (the profile) until RATIO_PRIOR units of evidence.
        e = min(1.0, b / EVIDENCE_BATCH)
        ev[g] += e
        w = e / min(ev[g], 1.0 / RATIO_ALPHA)
        num[g] += w * (step_s - num[g])
        den[g] += w * (self._times.times(b, ctx_len)[g] - den[g])
        trust = ev[g] / (ev[g] + RATIO_PRIOR)
        r[g] = 1.0 + trust * (num[g] / den[g] - 1.0)

    def _track_runs(self, gamma: int, emitted: int) -> None:
        """Keep the lag (tokens the stale draft must re-read) and run-length EMAs."""
        if gamma == 0:
            if self._run:
                self._run_len += RUN_ALPHA * (self._run - self._run_len)
                self._run = 0
            self._off_run += 1
            self._lag += emitted
        else:
            if self._off_run:
                self._off_len += RUN_ALPHA * (self._off_run - self._off_len)
                self._off_run = 0
            self._run += 1
            self._lag = 0


@register(
    "nightjar+",
    "ours: profile-guided nightjar keyed on batch and context, learned corrections, "
    "forgetting; nightjar+:slo for goodput under TTFT/TPOT limits",
)
def _nightjar_plus(arg: str | None, env: PolicyEnv) -> Policy:
    if arg == "batch-keyed":
        # The ablation of the context key: estimates per batch bucket only, as
        # nightjar+ was before it saw context (docs/policies.md, long contexts).
        return NightjarPlusPolicy(env, by_context=False)
    if arg == "kv-limit":
        return NightjarPlusPolicy(env, kv_limit=True)
    return NightjarPlusPolicy(env, parse_objective("nightjar+", arg))
