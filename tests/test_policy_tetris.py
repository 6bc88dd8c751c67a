"""tetris: per-request lengths under a verification budget."""

from __future__ import annotations

import pytest

from nightjar.core.policy import PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import make_policy


def _ctx(est: list[float] | None, ids: list[int] | None = None) -> StepContext:
    b = len(est) if est is not None else len(ids or [])
    return StepContext(0.0, b, 0, 10, 10, True, 4, request_ids=ids, acceptance_estimates=est)


def test_higher_acceptance_gets_longer_windows_within_the_budget() -> None:
    pol = make_policy("tetris:2", PolicyEnv(gamma_max=4))
    rates = [0.9, 0.2, 0.6, 0.95, 0.4, 0.7]
    lengths = pol.decide(_ctx(rates))
    assert isinstance(lengths, list)
    assert sum(lengths) == 12  # k * B
    assert all(0 <= x <= 4 for x in lengths)
    order = sorted(range(6), key=lambda i: rates[i])
    assert [lengths[i] for i in order] == sorted(lengths[i] for i in order)
    assert lengths[3] == 4 and lengths[1] == 0


def test_budget_caps_and_ties_are_deterministic() -> None:
    pol = make_policy("tetris:3", PolicyEnv(gamma_max=4))
    assert pol.decide(_ctx([0.5] * 4)) == [3, 3, 3, 3]
    assert pol.decide(_ctx([0.5, 0.5, 0.5])) == [3, 3, 3]
    full = make_policy("tetris:4", PolicyEnv(gamma_max=4))
    assert full.decide(_ctx([0.1, 0.9])) == [4, 4]
    none = make_policy("tetris:0", PolicyEnv(gamma_max=4))
    assert none.decide(_ctx([0.1, 0.9])) == [0, 0]


def test_learns_its_own_estimates_when_the_engine_has_none() -> None:
    pol = make_policy("tetris:1", PolicyEnv(gamma_max=4))
    pol.observe(StepOutcome(
        4, 2, 0.01, 8, 4, 6, request_ids=[7, 8],
        per_request_accepted=[4, 0], per_request_drafted=[4, 4],
    ))
    assert pol.decide(_ctx(None, ids=[8, 7])) == [0, 2]


def test_refuses_engines_without_per_request_lengths() -> None:
    with pytest.raises(NightjarInputError) as err:
        make_policy("tetris", PolicyEnv(per_request=False))
    assert str(err.value) == (
        "tetris needs per-request speculation lengths, which vLLM does not support"
    )
    for bad in ("tetris:x", "tetris:9", "tetris:-1"):
        with pytest.raises(NightjarInputError, match="tetris"):
            make_policy(bad, PolicyEnv(gamma_max=4))
