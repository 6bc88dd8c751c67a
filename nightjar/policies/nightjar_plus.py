"""``nightjar+``: ours. A model-guided bandit: predict each arm's loss, learn the error.

Where ``nightjar`` learns every (batch bucket, gamma) loss from scratch and spends
a fixed share of its steps exploring, ``nightjar+`` predicts the per-token latency
of every gamma and only learns how wrong the prediction is:

    loss(B, g) = T(B, g) / tau(a, g) * ratio[bucket(B)][g]  (+ switch penalty)

- ``T``: the profile's step time when one exists (a prior), else step times learned
  online per bucket (:mod:`nightjar.step_times`);
- ``tau(a, g) = (1 - a^(g+1)) / (1 - a)``, with ``a`` an online estimate of the
  batch's acceptance rate, recovered from accepted drafts by inverting the
  geometric mean (:class:`nightjar.bandit.AcceptanceInverter`);
- ``ratio``: per bucket and gamma, an EMA of observed / predicted loss, so
  profile error and the acceptance model's bias are corrected where they matter;
  a new bucket starts from its nearest neighbour's ratios (sharing);
- switch cost: turning speculation on pays C_switch, learned per missed token (the
  draft must re-read what it skipped) and predicted from the tokens emitted since
  speculation stopped; turning it off commits to a later rebuild, priced at the
  average observed C_switch; both amortised over the typical run length;
- exploration: with probability ``EXPLORE`` a neighbouring gamma of the best
  (toggling speculation on or off explores 4x less often); a 2% hysteresis
  keeps the current arm against near-ties, so gamma does not thrash.
Every estimate is an EMA, so the policy forgets and follows non-stationary loads.
"""

from __future__ import annotations

import random

from nightjar.bandit import (
    AcceptanceInverter,
    bucket_of,
    expected_tokens_all,
    parse_no_arg,
    step_loss,
)
from nightjar.policy import Policy, PolicyEnv, register
from nightjar.step_times import OnlineTimes, ProfileTimes
from nightjar.types import StepContext, StepOutcome

EXPLORE = 0.04
HYSTERESIS = 0.02
RATIO_ALPHA = 0.1
ACCEPT_ALPHA = 0.05
SWITCH_ALPHA = 0.3
RUN_ALPHA = 0.2
INITIAL_ALPHA = 0.6  # acceptance before any evidence, unless the env has a prior
INITIAL_RUN = 64.0
# A step with this many requests counts as a full observation; smaller ones less.
EVIDENCE_BATCH = 16  # steps a speculation run is assumed to last before one is seen


class NightjarPlusPolicy:
    name = "nightjar+"

    def __init__(self, env: PolicyEnv) -> None:
        self.arms = env.gamma_max + 1
        self._rng = random.Random(env.seed)
        self._times = (
            ProfileTimes(env.latency, env.gamma_max) if env.latency is not None
            else OnlineTimes(env.gamma_max)
        )
        self._inverter = AcceptanceInverter(env.gamma_max)
        self.alpha = env.acceptance_prior if env.acceptance_prior is not None else INITIAL_ALPHA
        self._tau = expected_tokens_all(self.alpha, env.gamma_max)
        self._ratio: dict[int, list[float]] = {}
        self._ratio_sums: dict[int, tuple[list[float], list[float]]] = {}
        self._ctx_len = 0.0
        self._current = 0
        # Switch-cost model: seconds per token missed while off, tokens missed so far.
        self._switch_rate = 0.0
        self._switch_avg = 0.0  # seconds per observed rebuild
        self._lag = 0
        self._run = 0  # length of the current speculation run, in steps
        self._run_len = INITIAL_RUN
        self._off = False

    def _sums(self, c: int) -> tuple[list[float], list[float]]:
        """EMAs of observed and predicted seconds per request, whose ratio is ``ratio``."""
        sums = self._ratio_sums.get(c)
        if sums is None:
            r = self._ratios(c)
            # Seeded with negligible weight: the first observation sets the ratio
            # (inherited neighbour ratios only stand in until then).
            sums = self._ratio_sums[c] = ([x * 1e-9 for x in r], [1e-9] * self.arms)
        return sums

    def _ratios(self, c: int) -> list[float]:
        r = self._ratio.get(c)
        if r is None:
            near = min(self._ratio, key=lambda k: abs(k - c), default=None)
            r = self._ratio[c] = list(self._ratio[near]) if near is not None else [1.0] * self.arms
        return r

    def losses(self, batch_size: int, context_len: float) -> list[float]:
        """Predicted per-token latency of every gamma, switch penalty included."""
        t = self._times.times(batch_size, context_len)
        r = self._ratios(bucket_of(batch_size))
        tau = self._tau
        out = [t[g] / tau[g] * r[g] for g in range(self.arms)]
        if self._off:
            # Turning on now pays the rebuild over every token the draft missed.
            cost = self._switch_rate * self._lag
            for g in range(1, self.arms):
                out[g] += cost / (self._run_len * tau[g])
        else:
            # Turning off commits to paying a rebuild when speculation comes back.
            out[0] += self._switch_avg / self._run_len
        return out

    def decide(self, ctx: StepContext) -> int:
        if not ctx.draft_resident:
            return self._chose(0)
        self._ctx_len = ctx.mean_context_len
        loss = self.losses(ctx.batch_size, ctx.mean_context_len)
        top = min(self.arms, ctx.gamma_max + 1)
        best = min(range(top), key=loss.__getitem__)
        cur = self._current if self._current < top else best
        if loss[cur] <= loss[best] * (1.0 + HYSTERESIS):
            best = cur
        u = self._rng.random()
        if u < EXPLORE:
            g = min(max(best + (1 if u < EXPLORE / 2 else -1), 0), top - 1)
            # Toggling speculation costs a switch: explore that edge 4x less often,
            # and less still when the switch is expensive beside a step's loss.
            if (g == 0) == (best == 0):
                return self._chose(g)
            extra = loss[g] - loss[best]
            if self._rng.random() * (1.0 + max(extra, 0.0) / loss[best]) < 0.25:
                return self._chose(g)
        self._current = best
        return self._chose(best)

    def _chose(self, g: int) -> int:
        # The switch state is what the engine will run next, not the last outcome:
        # outcomes may trail decisions by a step, and pricing a toggle against a
        # stale state would make the policy flip back and forth.
        self._off = g == 0
        return g

    def observe(self, outcome: StepOutcome) -> None:
        g, b = outcome.gamma, outcome.batch_size
        if outcome.switch_cost_s > 0.0:
            self._switch_avg += SWITCH_ALPHA * (outcome.switch_cost_s - self._switch_avg)
            if self._lag > 0:
                per_token = outcome.switch_cost_s / self._lag
                self._switch_rate += SWITCH_ALPHA * (per_token - self._switch_rate)
        self._track_runs(g, outcome.emitted)
        if outcome.clamped or g >= self.arms:
            return
        loss = step_loss(outcome)
        if loss is None:
            return
        self._times.learn(b, g, outcome.step_time_s - outcome.switch_cost_s)
        if g > 0:
            a = self._inverter.invert(outcome.accepted / b, g)
            if a is not None:
                self.alpha += ACCEPT_ALPHA * min(1.0, b / EVIDENCE_BATCH) * (a - self.alpha)
                self._tau = expected_tokens_all(self.alpha, self.arms - 1)
        c = bucket_of(b)
        r = self._ratios(c)
        num, den = self._sums(c)
        # Ratio of means, not mean of ratios: 1/emitted is noisy and biased upward at
        # small batches (most of all for long gammas); a step of B requests carries
        # B requests' worth of evidence, so small batches move the estimate less.
        w = RATIO_ALPHA * min(1.0, b / EVIDENCE_BATCH)
        predicted = self._times.times(b, self._ctx_len)[g] / self._tau[g]
        num[g] += w * (loss * outcome.emitted - num[g])
        den[g] += w * (predicted * outcome.emitted - den[g])
        r[g] = num[g] / den[g]

    def _track_runs(self, gamma: int, emitted: int) -> None:
        """Keep the lag (tokens the stale draft must re-read) and the run-length EMA."""
        if gamma == 0:
            if self._run:
                self._run_len += RUN_ALPHA * (self._run - self._run_len)
                self._run = 0
            self._lag += emitted
        else:
            self._run += 1
            self._lag = 0


@register("nightjar+", "ours: profile-guided nightjar with learned corrections and forgetting")
def _nightjar_plus(arg: str | None, env: PolicyEnv) -> Policy:
    parse_no_arg("nightjar+", arg)
    return NightjarPlusPolicy(env)
