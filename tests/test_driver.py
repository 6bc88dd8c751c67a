"""The step driver: plan/finish sequencing, the clamp, memory actions, the gain reload."""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest

from nightjar.core.driver import StepDriver
from nightjar.core.estimators import expected_tokens
from nightjar.core.memory import Action, DraftState, MemoryConfig, MemoryController
from nightjar.core.policy import PolicyEnv
from nightjar.core.types import Decision, StepContext, StepOutcome
from nightjar.policies.harness import KneeLatency
from nightjar.policies.registry import make_policy

DRAFT = 100  # the draft's footprint in KV blocks


def ctx(
    now: float = 0.0, batch: int = 4, free: int = 1000, waiting: int = 0, resident: bool = True
) -> StepContext:
    return StepContext(
        now=now, batch_size=batch, num_waiting=waiting, kv_free_blocks=free,
        kv_total_blocks=2000, draft_resident=resident, gamma_max=4,
    )


def outcome(gamma: int, batch: int = 4, drafted: int = 0, accepted: int = 0) -> StepOutcome:
    return StepOutcome(
        gamma=gamma, batch_size=batch, step_time_s=0.01, drafted=drafted, accepted=accepted,
        emitted=accepted + batch,
    )


@dataclass
class Scripted:
    """Returns the scripted decisions in turn and records what it is told."""

    decisions: Sequence[Decision]
    name: str = "scripted"
    asked: list[StepContext] = field(default_factory=list)
    seen: list[StepOutcome] = field(default_factory=list)

    def decide(self, ctx: StepContext) -> Decision:
        self.asked.append(ctx)
        return self.decisions[len(self.asked) - 1]

    def observe(self, outcome: StepOutcome) -> None:
        self.seen.append(outcome)


def off(**kw: float | bool) -> MemoryController:
    """A controller that offloads after one short step and has no time filters."""
    cfg = MemoryConfig(k_offload=1, k_reload=1, reload_hold_s=0.0, min_dwell_s=0.0, **kw)  # type: ignore[arg-type]
    return MemoryController(cfg, DRAFT, reload_cost_s=0.05)


def test_policy_is_asked_only_for_a_batch_and_finish_feeds_it() -> None:
    policy = Scripted([3])
    driver = StepDriver(policy, MemoryController(MemoryConfig(enabled=False), DRAFT))
    idle = driver.plan(ctx(batch=0))
    assert policy.asked == [] and idle.decision == 0 and idle.action is Action.NONE
    plan = driver.plan(ctx())
    assert [c.batch_size for c in policy.asked] == [4]
    assert (plan.decision, plan.chosen, plan.clamped) == (3, 3, False)
    driver.finish(outcome(3, drafted=12, accepted=6))
    assert len(policy.seen) == 1 and policy.seen[0].accepted == 6
    # The acceptance estimate starts at 0.5 (5 of 10) and follows what was reported.
    assert driver.acceptance_estimate() == pytest.approx((6 + 5) / (12 + 10))


def test_clamp_to_gamma_max_and_batch_gamma() -> None:
    ctrl = MemoryController(MemoryConfig(enabled=False), DRAFT)
    assert StepDriver(Scripted([9]), ctrl).plan(ctx()).decision == 4
    per_request = StepDriver(Scripted([[1, 7, -2, 0]]), ctrl).plan(ctx())
    assert per_request.decision == [1, 4, 0, 0] and per_request.gamma == 4
    # vLLM runs one length per batch: a per-request decision becomes its max.
    batch = StepDriver(Scripted([[1, 3, 2]]), ctrl, batch_gamma=True).plan(ctx())
    assert batch.chosen == 3 and batch.decision == 3


def test_offload_clamps_the_same_step_and_credits_a_chosen_zero() -> None:
    ctrl = off()
    driver = StepDriver(Scripted([0, 3, 0]), ctrl)
    # Short of blocks with gamma 0 chosen: the offload starts this step.
    first = driver.plan(ctx(free=10, waiting=2))
    assert first.action is Action.START_OFFLOAD and not driver.draft_resident
    assert (first.decision, first.clamped) == (0, False)  # the policy chose 0 itself
    second = driver.plan(ctx(now=0.1, free=10, waiting=2, resident=False))
    assert (second.decision, second.chosen, second.clamped) == (0, 3, True)
    assert second.action is Action.NONE  # a transfer in flight: nothing new starts
    ctrl.offload_done(0.2)
    assert ctrl.state is DraftState.OFFLOADED


def test_forced_actions_replace_the_controllers_step() -> None:
    ctrl = MemoryController(MemoryConfig(enabled=False), DRAFT)
    driver = StepDriver(Scripted([2, 2, 2]), ctrl)
    assert driver.plan(ctx(), forced=Action.START_RELOAD).action is Action.NONE  # not offloaded
    plan = driver.plan(ctx(now=1.0), forced=Action.START_OFFLOAD)
    assert plan.action is Action.START_OFFLOAD and plan.decision == 0 and plan.clamped
    ctrl.offload_done(1.5)
    assert driver.plan(ctx(now=2.0), forced=Action.START_RELOAD).action is Action.START_RELOAD
    assert ctrl.state is DraftState.RELOADING


def offloaded_driver(latency: KneeLatency | None, **kw: float | bool) -> StepDriver:
    ctrl = off(**kw)
    driver = StepDriver(Scripted([0] + [3] * 200), ctrl, latency)
    assert driver.plan(ctx(free=10, waiting=2)).action is Action.START_OFFLOAD
    ctrl.offload_done(0.1)
    return driver


def run_until_reload(driver: StepDriver, steps: int) -> int | None:
    """Steps with requests always waiting (the room-based reload never fires) but the
    draft's blocks free; returns the step that started a reload, if any."""
    for i in range(steps):
        plan = driver.plan(ctx(now=0.2 + 0.01 * i, batch=2, free=DRAFT + 20, waiting=1,
                               resident=False))
        if plan.action is Action.START_RELOAD:
            return i
    return None


def test_forgone_gain_reloads_once_it_pays_for_the_reload() -> None:
    latency = KneeLatency()
    driver = offloaded_driver(latency)
    # Small batch, long gamma pays: the gain per step is the model's, at acceptance 0.5.
    gain = driver.spec_gain_s(ctx(batch=2))
    base = latency.step_time_s(2, 0, 0.0)
    want = max(expected_tokens(0.5, g) * base - latency.step_time_s(2, g, 0.0) for g in range(5))
    assert gain == pytest.approx(want) and gain > 0
    step = run_until_reload(driver, 200)
    # The controller's reload cost is 0.05 s: the first step whose summed gain exceeds it.
    assert step is not None and step == int(0.05 // gain)
    assert driver.controller.gain_reloads == 1


def test_no_gain_reload_without_a_latency_model_or_when_disabled() -> None:
    assert run_until_reload(offloaded_driver(None), 200) is None
    assert run_until_reload(offloaded_driver(KneeLatency(), reload_on_gain=False), 200) is None


def test_simulator_and_live_share_the_driver_sequence() -> None:
    # Both engines build the same driver from a registered policy; the policy's own
    # name and decisions pass through untouched.
    policy = make_policy("fixed:2", PolicyEnv(gamma_max=4))
    plan = StepDriver(policy, MemoryController(MemoryConfig(enabled=False), DRAFT)).plan(ctx())
    assert plan.decision == 2 and plan.action is Action.NONE


def test_worker_message_is_typed_frozen_and_picklable() -> None:
    from nightjar.live.wire import IDLE, WorkerMessage, attach, message_of

    msg = WorkerMessage(Action.START_RELOAD, ((120, 3), (121, 4)))
    assert pickle.loads(pickle.dumps(msg)) == msg
    with pytest.raises(AttributeError):
        msg.residency = Action.NONE  # type: ignore[misc, unused-ignore]
    with pytest.raises(ValueError, match="only with a reload"):
        WorkerMessage(Action.START_OFFLOAD, ((1, 2),))

    class Out:  # stands in for vLLM's SchedulerOutput: any object with attributes
        pass

    out = Out()
    assert message_of(out) is IDLE and IDLE.empty
    attach(out, msg)
    assert message_of(out) is msg
