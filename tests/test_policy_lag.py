"""Step times of an engine that drafts one step ahead (vLLM V1), and nightjar+ on one.

The engine below is that lag in miniature: step t verifies the K chosen at t - 1 and
drafts the K chosen at t, so its time is ``V(K_prev) + D(K_now)``. Its steady-state
step ``T(g) = V(g) + D(g)`` makes speculation lose at B = 64 by about 24% per token;
its draft costs more than the verification it adds, as a draft model's forward
passes can at a large batch, so a switch step misprices gamma 0 by half its cost.
Learned from as it stands, that kept nightjar+ speculating on 80-100% of the steps.
"""

from __future__ import annotations

import pytest

from nightjar.core.acceptance import EffectiveAcceptance
from nightjar.core.estimators import expected_tokens
from nightjar.core.policy import PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.policies.lag import LagAttribution
from nightjar.policies.registry import make_policy

ALPHA = 0.55
B = 64


def _verify_s(g: int) -> float:
    return 0.060 + 0.025 * g


def _draft_s(g: int) -> float:
    return 0.030 * g


def _steady_s(g: int) -> float:
    return _verify_s(g) + _draft_s(g)


def test_steady_steps_pass_through_and_a_lasting_switch_loses_one() -> None:
    lag = LagAttribution()
    price = _steady_s
    assert lag.sample(1, 1, B, _steady_s(1), 0, price) == (1, _steady_s(1))
    # 1 -> 0 for good: the switch step is neither gamma's; the next one is gamma 0's.
    assert lag.sample(1, 0, B, _verify_s(1) + _draft_s(0), 0, price) is None
    assert lag.sample(0, 0, B, _steady_s(0), 0, price) == (0, _steady_s(0))
    # The simulator drafts within the step: every step is its gamma's.
    assert lag.sample(2, None, B, 0.17, 0, price) == (2, 0.17)


def test_a_one_step_probe_prices_the_probed_gamma_exactly() -> None:
    lag = LagAttribution()
    # Speculating at 1, one probe of 0, back to 1.
    assert lag.sample(1, 0, B, _verify_s(1) + _draft_s(0), 0, _steady_s) is None
    got = lag.sample(0, 1, B, _verify_s(0) + _draft_s(1), 0, _steady_s)
    assert got is not None and got[0] == 0
    assert got[1] == pytest.approx(_steady_s(0))


def test_a_switch_step_with_prompts_or_another_batch_is_dropped() -> None:
    with_prompts = LagAttribution()
    assert with_prompts.sample(1, 0, B, 0.1, 32, _steady_s) is None
    assert with_prompts.sample(0, 1, B, 0.1, 0, _steady_s) is None  # nothing held
    other_batch = LagAttribution()
    assert other_batch.sample(1, 0, B, 0.1, 0, _steady_s) is None
    assert other_batch.sample(0, 1, B - 1, 0.1, 0, _steady_s) is None
    unpriced = LagAttribution()
    assert unpriced.sample(1, 0, B, 0.1, 0, lambda g: None) is None
    assert unpriced.sample(0, 1, B, 0.1, 0, lambda g: None) is None


def test_a_step_between_breaks_the_pair() -> None:
    lag = LagAttribution()
    assert lag.sample(1, 0, B, _verify_s(1) + _draft_s(0), 0, _steady_s) is None
    lag.forget()  # a clamped step came between: the next switch is not its pair
    assert lag.sample(0, 1, B, _verify_s(0) + _draft_s(1), 0, _steady_s) is None


def _run_lagged(steps: int, seed: int) -> list[int]:
    pol = make_policy("nightjar+", PolicyEnv(gamma_max=3, seed=seed, per_request=False))
    chosen_prev, ran = 0, []
    for t in range(steps):
        ctx = StepContext(
            now=float(t), batch_size=B, num_waiting=0, kv_free_blocks=100,
            kv_total_blocks=200, draft_resident=True, gamma_max=3, mean_context_len=256.0,
        )
        chosen = pol.decide(ctx)
        verified = chosen_prev
        accepted = round(B * (expected_tokens(ALPHA, verified) - 1.0))
        pol.observe(StepOutcome(
            gamma=verified, batch_size=B, step_time_s=_verify_s(verified) + _draft_s(chosen),
            drafted=B * verified, accepted=accepted, emitted=B + accepted,
            drafting_gamma=chosen,
        ))
        ran.append(verified)
        chosen_prev = chosen
    return ran


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nightjar_plus_without_a_profile_stops_speculating_on_a_lagged_engine(
    seed: int,
) -> None:
    assert min(_steady_s(g) / expected_tokens(ALPHA, g) for g in (1, 2, 3)) > 1.2 * _steady_s(0)
    ran = _run_lagged(600, seed)
    late = ran[300:]
    assert sum(1 for g in late if g > 0) / len(late) <= 0.05


def test_a_prior_rate_outweighs_one_unlucky_step() -> None:
    weighted = EffectiveAcceptance(3, 0.53, 0.05, 16, prior_weight=1.0)
    bare = EffectiveAcceptance(3, 0.53, 0.05, 16)
    for acc in (weighted, bare):
        acc.update(1, 0, 1)  # B = 1, its one draft rejected
    assert bare.mean() == pytest.approx(0.0, abs=1e-6)
    assert weighted.mean() > 0.45
