"""Every adaptive policy honours the Policy contract on a fluctuating synthetic load."""

from __future__ import annotations

import pytest

from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.harness import KneeLatency, run_loop
from nightjar.policies.registry import make_policy, registered

ADAPTIVE = [
    "nightjar", "nightjar+", "dsd", "banditspec", "banditspec-exp3", "tetris", "sglang", "oracle",
]
ENV = PolicyEnv(gamma_max=4, seed=7, latency=KneeLatency())


def test_all_are_registered_with_a_summary() -> None:
    reg = registered()
    for name in ADAPTIVE:
        assert name in reg and reg[name].summary


def _run(spec: str, seed: int) -> list[int | list[int]]:
    pol: Policy = make_policy(spec, PolicyEnv(gamma_max=4, seed=seed, latency=KneeLatency()))
    trace = run_loop(
        pol, KneeLatency(), lambda t: 1 + (t * 37) % 200,
        lambda t, b: [0.3 + 0.6 * (t % 7) / 7] * b, 400, seed=seed, switch_cost_s=0.01,
    )
    return trace.decision


@pytest.mark.parametrize("spec", ADAPTIVE)
def test_decisions_are_in_range_and_deterministic(spec: str) -> None:
    first = _run(spec, 11)
    assert first == _run(spec, 11)
    for d in first:
        values = [d] if isinstance(d, int) else d
        assert all(isinstance(g, int) and 0 <= g <= 4 for g in values)


@pytest.mark.parametrize("spec", ADAPTIVE)
def test_an_offloaded_draft_and_clamped_outcomes_are_survived(spec: str) -> None:
    pol = make_policy(spec, ENV)
    away = StepContext(0.0, 8, 2, 5, 100, False, 4, 100.0, list(range(8)), [0.5] * 8, [0.5] * 8)
    pol.decide(away)
    pol.observe(StepOutcome(0, 8, 0.02, 0, 0, 8, clamped=True))
    pol.observe(StepOutcome(0, 8, 0.02, 0, 0, 0))  # nothing emitted: must not divide by 0


@pytest.mark.parametrize("spec", ["nightjar", "dsd", "banditspec", "oracle"])
def test_arguments_are_rejected(spec: str) -> None:
    with pytest.raises(NightjarInputError, match="takes no argument"):
        make_policy(f"{spec}:x", ENV)
