"""dsd, banditspec(-exp3), sglang and oracle on synthetic tables with known answers."""

from __future__ import annotations

from collections import Counter

import pytest

from nightjar.core.estimators import expected_tokens
from nightjar.core.policy import PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.dsd import DsdPolicy
from nightjar.policies.harness import KneeLatency, run_loop
from nightjar.policies.registry import make_policy
from nightjar.policies.sglang import SglangPolicy, parse_candidates

LAT = KneeLatency()


def _ctx(b: int, waiting: int = 0, free: int = 900, **kw: object) -> StepContext:
    return StepContext(0.0, b, waiting, free, 1000, True, 4, 512.0, **kw)  # type: ignore[arg-type]


# -- dsd -----------------------------------------------------------------------------


@pytest.mark.parametrize("b", [1, 4, 16, 32, 64, 128, 256])
def test_dsd_picks_the_goodput_argmax(b: int) -> None:
    pol = DsdPolicy(LAT, 4)
    good = [b * expected_tokens(0.7, k) / LAT.step_time_s(b, k, 512.0) for k in range(5)]
    good[0] *= 1.1
    assert pol.decide(_ctx(b)) == max(range(5), key=good.__getitem__)


def test_dsd_acceptance_ema_and_redecision_period() -> None:
    pol = DsdPolicy(LAT, 4)
    first = pol.decide(_ctx(32))
    pol.observe(StepOutcome(1, 32, 0.01, drafted=32, accepted=32, emitted=64))
    assert pol.alpha == pytest.approx(0.85 * 0.7 + 0.15 * 1.0)
    for _ in range(300):
        pol.observe(StepOutcome(1, 32, 0.01, drafted=32, accepted=32, emitted=64))
    # The cached choice for B = 32 holds until the 20-step re-decision.
    assert [pol.decide(_ctx(32)) for _ in range(18)] == [first] * 18
    assert pol.decide(_ctx(32)) > first  # a ~1.0 acceptance now favours a longer draft


def test_dsd_kv_guard_and_profile_requirement() -> None:
    pol = DsdPolicy(LAT, 4)
    assert pol.decide(_ctx(1, waiting=3)) == 0
    assert pol.decide(_ctx(1, free=10)) == 0
    assert pol.decide(_ctx(1)) > 0
    with pytest.raises(NightjarInputError, match="plans with a latency table"):
        make_policy("dsd", PolicyEnv())


# -- banditspec ----------------------------------------------------------------------


@pytest.mark.parametrize("spec", ["banditspec", "banditspec-exp3"])
@pytest.mark.parametrize(("b", "best"), [(1, 4), (256, 0)])
def test_banditspec_converges_on_a_stationary_load(spec: str, b: int, best: int) -> None:
    pol = make_policy(spec, PolicyEnv(gamma_max=4, seed=0))
    trace = run_loop(pol, LAT, lambda t: b, lambda t, n: [0.8] * n, 4000)
    assert Counter(trace.gamma[2000:]).most_common(1)[0][0] == best


def test_banditspec_ignores_clamped_steps() -> None:
    pol = make_policy("banditspec", PolicyEnv(gamma_max=2))
    pol.observe(StepOutcome(0, 4, 0.01, 0, 0, 4, clamped=True))
    assert [pol.decide(_ctx(4)) for _ in range(1)] == [0]  # arm 0 still untried


# -- sglang --------------------------------------------------------------------------


def test_sglang_climbs_and_drops_with_accepted_length_per_bucket() -> None:
    pol = SglangPolicy([1, 3, 4])
    assert pol.decide(_ctx(4)) == 3
    for _ in range(40):  # bucket of B = 4: everything accepted
        pol.observe(StepOutcome(3, 4, 0.01, 12, 12, 16))
    for _ in range(40):  # bucket of B = 64: nothing accepted
        pol.observe(StepOutcome(3, 64, 0.01, 192, 0, 64))
    assert pol.decide(_ctx(4)) == 4
    assert pol.decide(_ctx(64)) == 1
    assert pol.decide(_ctx(16)) == 3  # untouched bucket keeps the start


def test_sglang_candidates() -> None:
    assert parse_candidates(None, 4) == [1, 3, 4]
    assert parse_candidates("4,2", 4) == [2, 4]
    for bad in ("0,2", "1,9", "x"):
        with pytest.raises(NightjarInputError, match="sglang"):
            parse_candidates(bad, 4)


# -- oracle --------------------------------------------------------------------------


def test_oracle_maximises_expected_tokens_per_second_with_true_rates() -> None:
    pol = make_policy("oracle", PolicyEnv(gamma_max=4, latency=LAT))
    for b in (1, 16, 32, 256):
        for a in (0.5, 0.9):
            assert pol.decide(_ctx(b, true_acceptance=[a] * b)) == LAT.best_gamma(b, a)
    # Unequal rates: the sum of per-request expectations, not the mean rate.
    rates = [0.99] * 16 + [0.05] * 16
    want = max(
        range(5),
        key=lambda g: sum(expected_tokens(a, g) for a in rates) / LAT.step_time_s(32, g, 512.0),
    )
    assert pol.decide(_ctx(32, true_acceptance=rates)) == want
    with pytest.raises(NightjarInputError, match="needs a latency profile"):
        make_policy("oracle", PolicyEnv())
