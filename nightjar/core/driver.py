"""The step driver: one per engine run, the only place the per-step sequence lives.

Each engine step an engine adapter (``nightjar.sim.engine``, the live vLLM scheduler)
builds a :class:`StepContext` with ``draft_resident = driver.draft_resident`` and calls
:meth:`StepDriver.plan`, which

1. asks the policy (only when a batch runs: the contract is ``batch_size >= 1``);
2. advances the memory controller, handing it the speculation gain the step forgoes
   while the draft is away (``spec_gain_s``) so that the rent-or-buy early reload
   works in every engine (the controller already holds ``reload_cost_s``);
3. clamps the decision: gamma 0 while the draft is not resident (an offload that
   starts this step included), and every length into ``0..gamma_max``.

The adapter then starts the transfer named by :attr:`StepPlan.action`, runs the step
and reports it with :meth:`StepDriver.finish`, which feeds the policy and the
acceptance estimate the gain is computed from. The driver knows nothing of simpy or
vLLM; the transfers themselves (moving weights, taking KV blocks back) stay in the
engines, which report completion to :attr:`StepDriver.controller`.
"""

from __future__ import annotations

from dataclasses import dataclass

from nightjar.core.estimators import expected_tokens
from nightjar.core.memory import Action, MemoryController, pool_binds
from nightjar.core.policy import Policy
from nightjar.core.types import (
    Decision,
    LatencyModel,
    PrefillLatency,
    StepContext,
    StepOutcome,
)

# Neutral prior of the acceptance estimate: 0.5, worth ten drafted tokens.
_PRIOR_ACCEPTED = 5.0
_PRIOR_DRAFTED = 10.0
# EMA weight per step of the prompt tokens prefilled per output token (the load's
# prefill share): a few hundred steps, so a change of workload shows within seconds.
_MIX_ALPHA = 0.01
# Prompt tokens are priced per token at this chunk size (a typical V1 chunk).
_PREFILL_CHUNK = 2048


@dataclass(slots=True)  # read-only by contract; not frozen, as StepContext (types.py)
class StepPlan:
    """What the driver settled for one step.

    ``decision`` is what the engine runs (after every clamp); ``chosen`` what the
    policy asked for (0 when it was not asked); ``clamped`` says the residency clamp
    overrode a request to speculate, so learning policies must not credit the arm;
    ``action`` is the transfer the engine must start before running the step.
    """

    decision: Decision
    chosen: Decision
    clamped: bool
    action: Action

    @property
    def gamma(self) -> int:
        """The largest length in the decision: the batch's K in vLLM."""
        return _largest(self.decision)

    @property
    def chosen_gamma(self) -> int:
        """The largest length the policy asked for."""
        return _largest(self.chosen)


def _largest(decision: Decision) -> int:
    if isinstance(decision, int):
        return decision
    return max((int(g) for g in decision), default=0)


class StepDriver:
    """Owns the policy, the memory controller and the clamp of one engine run.

    ``latency`` (a profile or a measured step table) prices the gain of speculating
    while the draft is away; without it the early reload on gain is off, as it is
    when the controller has no ``reload_cost_s``. ``batch_gamma``: the engine runs
    one length for the whole batch (vLLM), so a per-request decision becomes its max.
    """

    def __init__(
        self,
        policy: Policy,
        controller: MemoryController,
        latency: LatencyModel | None = None,
        *,
        batch_gamma: bool = False,
    ) -> None:
        self.policy = policy
        self.controller = controller
        self.latency = latency
        self.batch_gamma = batch_gamma
        self.drafted = 0
        self.accepted = 0
        # EMAs of prompt tokens prefilled and tokens emitted per step.
        self._prefill_ema = 0.0
        self._emit_ema = 0.0
        self._capacity_on = (
            latency is not None
            and controller.config.enabled
            and controller.config.offload_on_capacity
            and controller.draft_blocks > 0
        )
        self._gain_on = (
            latency is not None
            and controller.reload_cost_s is not None
            and controller.config.enabled
            and controller.config.reload_on_gain
        )

    @property
    def draft_resident(self) -> bool:
        return self.controller.draft_resident

    def acceptance_estimate(self) -> float:
        """Accepted / drafted over the run so far, from a neutral prior of 0.5."""
        return (self.accepted + _PRIOR_ACCEPTED) / (self.drafted + _PRIOR_DRAFTED)

    def plan(self, ctx: StepContext, forced: Action = Action.NONE) -> StepPlan:
        """Decide, advance the controller, clamp. ``forced``: an operator or test
        command that replaces the controller's own step (see ``MemoryController.force``)."""
        chosen: Decision = self.policy.decide(ctx) if ctx.batch_size else 0
        if self.batch_gamma and not isinstance(chosen, int):
            chosen = _largest(chosen)
        ctrl = self.controller
        # The prices first, then the controller's moves together: a forced action
        # replaces the controller's own step, so its prices are not read.
        # (the flags first: with the hooks off, as in most runs, nothing else is read)
        own = forced is Action.NONE
        gain = (
            self.spec_gain_s(ctx) if own and self._gain_on and not ctrl.draft_resident
            else None
        )
        rent = (
            self.capacity_gain(ctx)
            if own and self._capacity_on and ctx.batch_size and ctrl.draft_resident
            else None
        )
        if own:
            action = ctrl.step(ctx, chosen, gain, rent)
        else:
            action = forced if ctrl.force(forced, ctx.now) else Action.NONE
        decision, clamped = ctrl.runnable(chosen, ctx)
        return StepPlan(decision, chosen, clamped, action)

    def finish(self, outcome: StepOutcome) -> None:
        """Report a step that ran a batch (``batch_size >= 1``) to the policy."""
        self.drafted += outcome.drafted
        self.accepted += outcome.accepted
        self._prefill_ema += _MIX_ALPHA * (outcome.prefill_tokens - self._prefill_ema)
        self._emit_ema += _MIX_ALPHA * (outcome.emitted - self._emit_ema)
        self.policy.observe(outcome)

    def capacity_gain(self, ctx: StepContext) -> float | None:
        """Relative throughput gain of offloading the draft now; None unless capacity binds.

        Capacity binds when the waiting queue needs more blocks than are free, or a
        waiting request was preempted. Then the draft's ``D`` blocks would admit
        ``k`` more of the waiting requests (each needing the queue's mean prompt in
        blocks, plus one to grow). Priced with the step-time model as seconds of
        work per output token: with the draft, ``B`` requests at the best gamma,
        ``min_g T(B, g, c) / (B tau(g))`` (gamma 0 included); without it, ``B + k``
        requests at gamma 0 and the mixed context. Where the model also prices
        prompts, both sides add the load's prompt tokens per output token (an EMA of
        what the steps prefilled and emitted) times the per-token prefill cost, and
        the draft's side its own prefill of those prompts: on a prefill-heavy load
        (long documents, short answers) that is most of the work the draft adds.
        Returns ``with / without - 1``: positive, the blocks are worth more than
        speculation buys. What it leaves out (a batch that ``max_num_seqs`` caps
        rather than blocks) is filtered by ``k_offload`` consecutive steps and the
        dwell times.
        """
        bs, waiting, latency = ctx.kv_block_size, ctx.num_waiting, self.latency
        if bs <= 0 or waiting == 0 or latency is None:
            return None
        if not pool_binds(ctx):
            return None
        per_request = -(-ctx.waiting_tokens // (waiting * bs)) + 1
        free = ctx.kv_free_blocks
        k = min(waiting, (free + self.controller.draft_blocks) // per_request) - min(
            waiting, free // per_request
        )
        if ctx.max_num_seqs > 0:
            # Seats, not blocks, bound the batch there: the blocks would admit nobody.
            k = min(k, ctx.max_num_seqs - ctx.batch_size)
        if k <= 0:
            return None
        b, c = ctx.batch_size, ctx.mean_context_len
        acceptance = self.acceptance_estimate()
        with_draft = min(
            latency.step_time_s(b, g, c) / (b * expected_tokens(acceptance, g))
            for g in range(ctx.gamma_max + 1)
        )
        mixed = (b * c + k * ctx.waiting_tokens / waiting) / (b + k)
        without = latency.step_time_s(b + k, 0, mixed) / (b + k)
        if isinstance(latency, PrefillLatency) and self._emit_ema > 0.0:
            per_output = self._prefill_ema / self._emit_ema
            n = _PREFILL_CHUNK
            target = latency.prefill_time_s(n) / n
            without += per_output * target
            with_draft += per_output * (target + latency.draft_prefill_time_s(n) / n)
        return with_draft / without - 1.0

    def spec_gain_s(self, ctx: StepContext) -> float:
        """Seconds one step would save by speculating at its best gamma, by ``latency``.

        Against gamma 0 at this batch and context, with the run's acceptance estimate:
        ``max_g E[tokens | g] * T(B, 0) - T(B, g)``, floored at 0.
        """
        b, c = ctx.batch_size, ctx.mean_context_len
        if b == 0 or self.latency is None:
            return 0.0
        acceptance = self.acceptance_estimate()
        base = self.latency.step_time_s(b, 0, c)
        best = 0.0
        for g in range(1, ctx.gamma_max + 1):
            tokens = expected_tokens(acceptance, g)
            best = max(best, tokens * base - self.latency.step_time_s(b, g, c))
        return best
