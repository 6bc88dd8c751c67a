"""Prompts prefilled in a step are the load's cost, not the arm's: learning must not blame it."""

from __future__ import annotations

import dataclasses

import pytest

from nightjar.core.estimators import PrefillCost
from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import Decision, StepContext, StepOutcome
from nightjar.policies.harness import KneeLatency, run_loop
from nightjar.policies.registry import make_policy

LAT = KneeLatency()


class Blind:
    """Hides ``prefill_tokens`` from a policy: what learning without the field would see."""

    name = "blind"

    def __init__(self, inner: Policy) -> None:
        self.inner = inner

    def decide(self, ctx: StepContext) -> Decision:
        return self.inner.decide(ctx)

    def observe(self, outcome: StepOutcome) -> None:
        self.inner.observe(dataclasses.replace(outcome, prefill_tokens=0))


def _gamma0_share(policy: Policy) -> float:
    # At B = 256 gamma 0 is best (LAT), but half of the gamma-0 steps also prefill
    # 64 prompt tokens (20 ms more): blamed on the arm, gamma 1 would look better.
    assert LAT.best_gamma(256, 0.8) == 0
    trace = run_loop(
        policy, LAT, lambda t: 256, lambda t, b: [0.8] * b, 6000,
        prefill=lambda t, g: 64 if g == 0 and t % 2 == 0 else 0,
    )
    return trace.share(0, 3000)


@pytest.mark.parametrize(("spec", "profiled"), [("nightjar", False), ("nightjar+", False)])
def test_prefill_in_the_step_is_not_blamed_on_the_arm(spec: str, profiled: bool) -> None:
    def build() -> Policy:
        return make_policy(spec, PolicyEnv(gamma_max=4, seed=0, latency=LAT if profiled else None))

    assert _gamma0_share(build()) > 0.75
    assert _gamma0_share(Blind(build())) < 0.5  # the confound is real


def test_prefill_cost_is_learned_per_token_bucket_and_borrowed_nearby() -> None:
    cost = PrefillCost()
    assert cost.decode_time(0.05, 10) is None  # nothing known: do not credit
    assert cost.decode_time(0.05, 0) == 0.05  # a pure decode step needs nothing
    for _ in range(50):
        cost.learn(40, 0.015)
        cost.learn(3000, 0.3)
    assert cost.estimate(33) == pytest.approx(0.015)
    assert cost.estimate(100) == pytest.approx(0.015)  # nearest learned bucket
    assert cost.estimate(2500) == pytest.approx(0.3)
    assert cost.decode_time(0.05, 40) == pytest.approx(0.035)
    cost.learn(40, -1.0)
    assert cost.estimate(40) is not None and cost.estimate(40) >= 0.0  # type: ignore[operator]
