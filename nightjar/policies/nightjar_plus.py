"""``nightjar+``: ours. Predict each gamma's per-token latency from one learned model
of the hardware; choose the least.

Where ``nightjar`` learns every (batch bucket, gamma) loss from scratch and spends
a fixed share of its steps exploring, ``nightjar+`` predicts the loss of every
gamma:

    loss(B, c, g) = T(B, g, c) / tau(g)  (+ switch penalty)

- ``T``: :class:`nightjar.policies.step_times.StepModel`, a linear model of the step
  fitted online from every step that ran, globally and per (batch bucket, context
  bucket) cell, on the prior's features when a prior exists (a profile: its scale,
  its cost of speculating and an overhead are corrected) or on a neutral shape of
  the step's work when none does. Evidence at one gamma moves every gamma's price,
  and evidence at one batch size the others'. Without a prior a cell's first
  decision measures gamma 0, and any cell that has gone long without a gamma-0 step
  measures it once (:data:`PROBE_BELOW`): from speculating steps alone the split
  between the target's cost and the draft's is the prior's guess. On an engine that
  drafts a step ahead (vLLM V1) only steps whose verified and drafted K agree are
  learned from, and one-step excursions from their pair (:mod:`nightjar.policies.lag`);
- ``tau(g)``: the tokens per request the batch keeps at gamma g. Where the engine
  names the running requests, the mean over them of each one's expected tokens
  under its own acceptance posterior, less the tokens a step emits past a request's
  end (:class:`nightjar.core.request_acceptance.RequestAcceptance`): the batch's
  composition is tracked as it changes, and a gamma whose extra tokens short answers
  cannot use is not credited with them. Elsewhere, per-gamma effective acceptance
  rates recovered by inverting the observed accepted drafts
  (:class:`nightjar.core.acceptance.EffectiveAcceptance`), so a batch of unequal rates
  is priced right at every gamma. Learned from the first speculating step, starting
  from the deployment's prior rate where it has one (``PolicyEnv.acceptance_prior``),
  which is also the population mean a new request starts from;
- buckets: (batch-size bucket, context bucket) of the batch's mean context
  (:func:`nightjar.core.estimators.context_bucket_of`): at long contexts a decode step is
  KV-bound even at large batches (MagicDec, arXiv 2408.11049);
- switch cost: turning speculation on pays C_switch, learned per missed token (the
  draft must re-read what it skipped) and predicted from the tokens emitted since
  speculation stopped, capped at the running requests' contexts, amortised over the
  typical length of a speculation run. Turning it off is not priced (``OFF_COMMIT``
  0; docs/policies.md says why);
- looking again: where the means say gamma 0, which teaches nothing about acceptance,
  the speculating lengths are priced with the batch's mean rate ``OPTIMISM``
  posterior standard deviations higher, and run if they then win;
- exploration: while no request waits, with probability ``EXPLORE`` a neighbouring
  gamma of the best (toggling speculation explores 4x less often, and much less
  when the rebuild is dear, since one exploring step pays all of it; with a drafter
  that keeps no KV, ``PolicyEnv.drafter`` n-gram or suffix, a toggle is free and
  explored like any neighbour). Under a queue nothing is explored: every waiting
  request would pay the exploring step. A 1% hysteresis keeps the current arm
  against near-ties;
- objective and KV pressure (:mod:`nightjar.policies.objective`): with ``nightjar+:kv-limit``
  lengths whose lookahead the free blocks cannot hold are never chosen (off by
  default: measured, it costs more than it saves); ``nightjar+:slo`` trades per-token
  latency below the TPOT limit for shorter steps while requests wait for one.
Every estimate forgets, so the policy follows non-stationary loads. The constants
and why they have their values: docs/policies.md.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence

from nightjar.core.acceptance import EffectiveAcceptance
from nightjar.core.drafter import drafter_kind
from nightjar.core.estimators import RebuildCost
from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.request_acceptance import RequestAcceptance
from nightjar.core.types import StepContext, StepOutcome
from nightjar.policies.lag import LagAttribution
from nightjar.policies.objective import Objective, lookahead_top, parse_objective, slo_choice
from nightjar.policies.registry import register
from nightjar.policies.step_times import (
    Basis,
    CellView,
    NeutralBasis,
    ProfileBasis,
    StepModel,
)

EXPLORE = 0.01
HYSTERESIS = 0.01
ACCEPT_ALPHA = 0.05
SWITCH_ALPHA = 0.3
RUN_ALPHA = 0.2
INITIAL_ALPHA = 0.6  # acceptance before any evidence, unless the env has a prior
INITIAL_RUN = 64.0  # steps a speculation run is assumed to last before one is seen
# A step with this many requests counts as a full observation of acceptance.
EVIDENCE_BATCH = 16
# What the deployment's prior acceptance rate is worth, in full observations: at
# B = 1 one unlucky step of a 0.53 draft (nothing accepted of 3) once set the
# estimate to 0, and a policy that no longer speculates never learns otherwise.
PRIOR_EVIDENCE = 1.0
# What INITIAL_ALPHA is worth without a prior: one request-step, so that two unlucky
# steps at B = 1 cannot set the population's mean to 0 (a Beta posterior at mean 0 has
# no spread left for OPTIMISM to argue from).
GUESS_EVIDENCE = 1.0 / EVIDENCE_BATCH
# A cell whose discounted count of gamma-0 steps fell below this (about 140 of its
# steps since the last one, at the cell's memory of 100) measures gamma 0 once; a
# cell never seen at gamma 0 does so at once without a prior, and after
# PROBE_AFTER steps with one.
PROBE_BELOW = 0.25
# Weight of the rebuild that turning speculation off commits to (0: priced only when
# speculation turns back on, with the lag it then has).
OFF_COMMIT = 0.0
PROBE_AFTER = 20.0
# Standard deviations of the batch's mean acceptance that may argue for speculating
# when the means say gamma 0 (:meth:`NightjarPlusPolicy._look_again`).
OPTIMISM = 1.0


class NightjarPlusPolicy:
    name = "nightjar+"
    # The running requests' ids and per-request accepts (RequestAcceptance).
    uses_request_info = True

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
        basis: Basis = (
            ProfileBasis(env.latency, env.gamma_max) if env.latency is not None
            else NeutralBasis()
        )
        self._times = StepModel(basis, env.gamma_max, by_context)
        self._lagged = LagAttribution()
        known = env.acceptance_prior is not None
        prior = env.acceptance_prior if env.acceptance_prior is not None else INITIAL_ALPHA
        self._acc = EffectiveAcceptance(
            env.gamma_max, prior, ACCEPT_ALPHA, EVIDENCE_BATCH,
            PRIOR_EVIDENCE if known else GUESS_EVIDENCE,
        )
        self._requests = RequestAcceptance(env.gamma_max, ACCEPT_ALPHA)
        # Tokens per request the current batch keeps at each gamma (set per decision).
        self._tau: list[float] | None = None
        # (context length, lag that a rebuild would re-read) of decisions whose
        # outcome has not arrived.
        self._pending: deque[tuple[float, float]] = deque(maxlen=8)
        self._current = 0
        self._rebuild = RebuildCost()  # seconds of rebuild for the tokens missed while off
        self._switch_avg = 0.0  # seconds per observed rebuild
        self._lag = 0  # tokens emitted or prefilled since speculation last ran
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

    def step_times(self, batch_size: int, context_len: float) -> list[float]:
        """Predicted seconds of a decode step at every gamma (tests, diagnostics)."""
        return self._times.times(batch_size, context_len)

    def losses(self, batch_size: int, context_len: float, times: list[float],
               taus: list[float] | None = None) -> list[float]:
        """Predicted per-token latency of every gamma, switch penalty included
        (``times``: the step's predicted seconds at each gamma, from the one view of
        its cell a decision reads; ``taus``: tokens per request at each gamma, the
        batch's estimate if None).

        The rebuild re-reads what the running requests emitted while the draft was
        off, which cannot exceed their contexts: after a long off-run under load the
        requests that were running then are mostly gone.
        """
        tau = taus if taus is not None else self.taus()
        out = [times[g] / tau[g] for g in range(self.arms)]
        if self._off:
            # Turning on now pays the rebuild over every token the draft missed.
            cost = self._rebuild.predict(self._lag_now(batch_size, context_len))
            for g in range(1, self.arms):
                out[g] += cost / (self._run_len * tau[g])
        elif OFF_COMMIT:
            # Turning off commits to paying a rebuild when speculation comes back.
            out[0] += OFF_COMMIT * self._switch_avg / self._off_len
        return out

    def taus(self) -> list[float]:
        """Tokens per request at each gamma for the batch of the last decision (the
        batch-level estimate where the engine named no requests)."""
        return self._tau if self._tau is not None else self._acc.taus

    def _lag_now(self, batch_size: int, context_len: float) -> float:
        return min(float(self._lag), batch_size * context_len)

    def _probe_zero(self, ctx: StepContext, cell: CellView) -> bool:
        """Whether this cell should measure gamma 0 now (see PROBE_BELOW).

        Without a prior a cell's first gamma-0 step is taken at once; so it is with a
        prior that ranks gamma 0 first in this cell: evidence from other cells may
        have moved the shared model's price of gamma 0 here (a slow probe at B = 1
        once kept a B = 64 cell speculating for the 20 steps before its probe, where
        the table said no speculation), and one step settles it at no cost by the
        prior's own account. A later probe waits for an empty queue: a gamma-0 step
        that admits prompts leaves them out of the draft's KV (``--draft-kv skip``),
        and the next speculating step pays their rebuild, which can cost more than
        the probe teaches.
        """
        if cell.seen_zero >= PROBE_BELOW:
            return False
        if not self._profiled and cell.evidence <= 0.0:
            return True
        if self._profiled and self._prior_ranks_zero_first(cell.prior):
            return True
        if ctx.num_waiting > 0:
            return False
        return self._profiled is False or cell.evidence >= PROBE_AFTER

    def _prior_ranks_zero_first(self, t: list[float] | None) -> bool:
        if t is None:
            return False
        tau = self.taus()
        return all(t[0] <= t[g] / tau[g] for g in range(1, self.arms))

    def decide(self, ctx: StepContext) -> int:
        self._pending.append(
            (ctx.mean_context_len, self._lag_now(ctx.batch_size, ctx.mean_context_len))
        )
        if not ctx.draft_resident:
            return self._chose(0)
        ids = ctx.request_ids
        self._tau = (self._requests.useful_tokens(ids, self._acc.mean())
                     if ids is not None else None)
        # The cell read once: every price below comes from this one view.
        cell = self._times.look(ctx.batch_size, ctx.mean_context_len, PROBE_BELOW)
        if self._probe_zero(ctx, cell):
            return self._chose(0)
        t = cell.times
        loss = self.losses(ctx.batch_size, ctx.mean_context_len, t)
        top = min(self.arms, ctx.gamma_max + 1)
        if self.kv_limit:
            top = lookahead_top(ctx, top)
        best = min(range(top), key=loss.__getitem__)
        pick = None
        if self.objective.slo is not None:
            pick = slo_choice(self.objective, ctx, loss, t[:top], top)
        if pick is not None:
            # The SLO objective's choice: the per-token hysteresis below would keep the
            # current (per-token cheaper) arm against it every time.
            best = pick
        else:
            cur = self._current if self._current < top else best
            if loss[cur] <= loss[best] * (1.0 + HYSTERESIS):
                best = cur
            if best == 0 and top > 1 and ids is not None:
                best = self._look_again(ctx, ids, t, loss[0], top)
        self._current = best
        u = self._rng.random()
        # Explore only with no request waiting: under a queue every waiting request
        # pays an exploring step's extra time, while what it teaches does not grow
        # with the queue (H100-TP2 migration: 1-3 such steps per 15 s with hundreds
        # waiting were half of nightjar+'s 0.15% E2E gap to fixed:1; reports/memory).
        # Invariant: with requests waiting, no step explores (a cell's first gamma-0
        # probe still may, :meth:`_probe_zero`).
        if u < EXPLORE and ctx.num_waiting == 0:
            g = min(max(best + (1 if u < EXPLORE / 2 else -1), 0), top - 1)
            # A toggle costs a switch: explore it 4x less often, and much less when
            # it is dear. One exploring step pays the whole rebuild (not amortised
            # over a run), so its price is counted in steps.
            extra = max(loss[g] - loss[best], 0.0) / loss[best]
            if g > 0 and self._off:
                t_best = t[best]
                lag = self._lag_now(ctx.batch_size, ctx.mean_context_len)
                extra += self._rebuild.predict(lag) / t_best
            if (
                self._free_toggle
                or (g == 0) == (best == 0)
                or self._rng.random() * (1.0 + extra) ** 2 < 0.25
            ):
                return self._chose(g)
        return self._chose(best)

    def _look_again(self, ctx: StepContext, ids: Sequence[int], t: list[float],
                    loss_zero: float, top: int) -> int:
        """Gamma 0, or the speculating length that beats it if the running requests'
        acceptance is OPTIMISM standard deviations better than their posteriors' means.

        Gamma 0 is the one choice that teaches nothing about acceptance: at B = 1 two
        unlucky steps of a 0.53 draft put its request's posterior below the break-even
        of a 10% margin, and a greedy choice then never speculated for that request
        again (CI, test_policy_switch: 36% of the steps at B = 1 after a burst). The
        bonus is one standard deviation of the batch's mean rate, which vanishes as
        the requests are seen and as the batch grows; choosing among speculating
        lengths stays on the means, since every one of them teaches.
        """
        hopeful = self._requests.useful_tokens(ids, self._acc.mean(), OPTIMISM)
        if hopeful is None:
            return 0
        loss = self.losses(ctx.batch_size, ctx.mean_context_len, t, hopeful)
        g = min(range(1, top), key=loss.__getitem__)
        return g if loss[g] < loss_zero else 0

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
            self._rebuild.learn(lag, outcome.switch_cost_s)
        self._track_runs(g, outcome.emitted + outcome.prefill_tokens)
        if outcome.clamped or g >= self.arms or b <= 0 or outcome.emitted <= 0:
            self._lagged.forget()
            return
        if g > 0 and outcome.drafted > 0:
            # Acceptance per request that drafted: a lookup drafter (n-gram) that found
            # no match proposes nothing, and a step where no request drafted says
            # nothing about acceptance (counting it as all rejected once switched an
            # n-gram drafter off for good after four unmatched steps).
            self._acc.update(g, outcome.accepted, outcome.drafted / g)
        self._learn_requests(outcome)
        step_s = outcome.step_time_s - outcome.switch_cost_s
        sample = self._lagged.sample(
            g, outcome.drafting_gamma, b, step_s, outcome.prefill_tokens,
            lambda other: self._times.times(b, ctx_len)[other] if self._times.fitted else None,
        )
        if sample is not None:
            self._times.learn(b, sample[0], sample[1], ctx_len, outcome.prefill_tokens)

    def _learn_requests(self, outcome: StepOutcome) -> None:
        """Each request's accepts, and the tokens the step emitted past requests' ends:
        on a decode-only step (a prompt that finished would add its first token) every
        accepted draft plus the bonus token is emitted unless its request ended."""
        ids, accepted = outcome.request_ids, outcome.per_request_accepted
        drafted = outcome.per_request_drafted
        if ids is None or accepted is None or drafted is None:
            return
        lost = None
        if outcome.prefill_tokens == 0 and outcome.drafted > 0:
            lost = max(0, outcome.accepted + outcome.batch_size - outcome.emitted)
        self._requests.observe(ids, accepted, drafted, self._acc.mean(), lost)

    def _track_runs(self, gamma: int, missed: int) -> None:
        """Keep the lag (tokens the stale draft must re-read: those emitted and the
        prompt tokens prefilled while it was off) and run-length EMAs."""
        if gamma == 0:
            if self._run:
                self._run_len += RUN_ALPHA * (self._run - self._run_len)
                self._run = 0
            self._off_run += 1
            self._lag += missed
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
