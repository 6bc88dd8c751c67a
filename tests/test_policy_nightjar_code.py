"""``nightjar-code``, the port of the published ADABinGreedy: gate, bins, priors, reward."""

from __future__ import annotations

from collections import Counter

import pytest

from nightjar.core.policy import PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.nightjar_code import NightjarCodePolicy, context_bin, prior_weights
from nightjar.policies.registry import make_policy


def _ctx(b: int, rate: float | None = 0.0) -> StepContext:
    return StepContext(0.0, b, 0, 900, 1000, True, 3, 512.0, arrival_rate_rps=rate)


def _out(g: int, b: int, emitted: int, step_s: float, switch: float = 0.0) -> StepOutcome:
    return StepOutcome(g, b, step_s, drafted=g * b, accepted=emitted - b, emitted=emitted,
                       switch_cost_s=switch)


@pytest.mark.parametrize(
    ("b", "expected"),
    [(1, 0), (2, 0), (3, 1), (4, 1), (5, 2), (20, 9), (21, 10), (22, 10), (23, 11),
     (24, 11), (256, 11)],
)
def test_linear_bins_capped_at_eleven(b: int, expected: int) -> None:
    assert context_bin(b) == expected


def test_prior_weights_never_explore_gamma0_in_small_bins() -> None:
    # K = 4 arms (gamma_max 3): every bin's middle batch size 2*bin+1.5 <= 23.5 < 50.
    w = prior_weights(4)
    assert len(w) == 12
    assert all(row == [0.0, 0.5, 0.5, 0.5] for row in w)
    assert all(row == [0.5] * 4 for row in prior_weights(4, allow_zero=True))


def test_exploration_draws_by_prior_weights() -> None:
    pol = NightjarCodePolicy(PolicyEnv(gamma_max=3, seed=1))
    # The first decisions of a fresh bin explore (bin 1 of each block explores with
    # probability 1); with no observations, exploitation would pick gamma 1 (ties
    # go to the first of the 0.5 priors), so a spread over 1..3 is exploration.
    counts = Counter(pol.decide(_ctx(1)) for _ in range(3000))
    assert counts[0] == 0
    assert set(counts) == {1, 2, 3}
    allow = NightjarCodePolicy(PolicyEnv(gamma_max=3, seed=1), allow_zero=True)
    assert Counter(allow.decide(_ctx(1)) for _ in range(3000))[0] > 0


def test_first_bins_follow_the_block_cascade() -> None:
    # Blocks of 1, 2, 4 rounds with bins of 1, 1, 2 rounds; the first bin of every
    # block explores with probability 1 (1/sqrt(1)).
    pol = NightjarCodePolicy(PolicyEnv(gamma_max=3, seed=0))
    sched = pol._sched[0]
    seen = []
    for _ in range(4):
        pol.decide(_ctx(1))
        seen.append((sched.block, sched.bin_idx, sched.steps))
    assert seen == [(1, 1, 1), (2, 1, 1), (2, 2, 1), (3, 1, 1)]


def test_reward_is_a_plain_running_mean_of_per_request_rate() -> None:
    pol = NightjarCodePolicy(PolicyEnv(gamma_max=3))
    g = pol.decide(_ctx(4))
    pol.observe(_out(g, 4, emitted=8, step_s=0.02))  # (8/4)/0.02 = 100 tok/s
    pol.decide(_ctx(4))
    pol.observe(_out(g, 4, emitted=4, step_s=0.02))  # 50 tok/s (asked one step ago)
    assert pol.n[1][g] == 2
    assert pol.mean[1][g] == pytest.approx((100 + 50) / 2, rel=1e-4)


def test_an_engine_forced_gamma_0_is_not_credited() -> None:
    # Live, the first decode step after admission verifies nothing (gamma 0) though
    # the policy asked for more; the published code credits the arm it chose, so
    # gamma 0, which its priors never explore, must not be learned from that step.
    pol = NightjarCodePolicy(PolicyEnv(gamma_max=3))
    g = pol.decide(_ctx(4))
    assert g > 0
    pol.observe(_out(0, 4, emitted=4, step_s=0.01))
    assert pol.n[1][0] == 0


def test_exploitation_takes_the_prior_smoothed_argmax() -> None:
    pol = NightjarCodePolicy(PolicyEnv(gamma_max=3))
    pol.n[0] = [0, 3, 1, 0]
    pol.mean[0] = [0.0, 40.0, 90.0, 0.0]
    sched = pol._sched[0]
    sched.block, sched.bin_idx, sched.steps, sched.exploring = 5, 3, 0, False
    # scores: gamma1 (120+0.5)/4 = 30.1, gamma2 (90+0.5)/2 = 45.25, gamma3 0.5, gamma0 0.
    assert pol.decide(_ctx(2)) == 2


@pytest.mark.parametrize(
    ("b", "rate", "gated"),
    [(21, 2.1, True), (20, 5.0, False), (21, 2.0, False), (100, 10.0, True), (21, None, False)],
)
def test_hard_gate_needs_b_over_20_and_rate_over_2(b: int, rate: float | None,
                                                   gated: bool) -> None:
    pol = NightjarCodePolicy(PolicyEnv(gamma_max=3, seed=0))
    g = pol.decide(_ctx(b, rate))
    assert (g == 0) == gated
    assert pol.disabled == gated
    assert NightjarCodePolicy(PolicyEnv(gamma_max=3), gate=False).decide(_ctx(b, rate)) > 0


def test_no_learning_while_gated_and_reenable_after() -> None:
    pol = NightjarCodePolicy(PolicyEnv(gamma_max=3, seed=0))
    assert pol.decide(_ctx(30, 5.0)) == 0
    pol.observe(_out(0, 30, emitted=30, step_s=0.05))
    assert pol.n[11] == [0, 0, 0, 0]  # learning paused above the gate
    # Load drops: the re-enable branch compares 1/reward of gamma 0 (never measured:
    # infinite) with 1/reward + C_prefill/g of the measured gammas.
    pol.n[0][2], pol.mean[0][2] = 5, 80.0
    assert pol.decide(_ctx(1, 0.5)) == 2
    assert not pol.disabled


def test_reenable_prices_the_catch_up_cost() -> None:
    pol = NightjarCodePolicy(PolicyEnv(gamma_max=3, seed=0), allow_zero=True)
    pol.disabled = True
    pol.mean[0] = [50.0, 60.0, 0.0, 0.0]  # per-token: 0.02 s vs 0.0167 s
    pol.c_prefill = 0.01  # gamma 1 then costs 0.0167 + 0.01 > 0.02
    sched = pol._sched[0]
    sched.block, sched.bin_idx, sched.steps, sched.exploring = 5, 3, 0, False
    assert pol.decide(_ctx(1)) == 0 and pol.disabled
    pol.c_prefill = 0.001
    assert pol.decide(_ctx(1)) == 1 and not pol.disabled


@pytest.mark.parametrize("arg", ["nogate,bogus", "", "gate", "allow0,,"])
def test_bad_arguments_are_one_line_input_errors(arg: str) -> None:
    # ``nightjar-code:`` (an empty argument) is a typo, not the plain port.
    with pytest.raises(NightjarInputError, match="unknown argument"):
        make_policy(f"nightjar-code:{arg}", PolicyEnv())
    assert make_policy("nightjar-code", PolicyEnv()).name == "nightjar-code"


def test_ablation_specs_build() -> None:
    for spec in ("nightjar-code:nogate", "nightjar-code:allow0", "nightjar-code:nogate,allow0"):
        assert make_policy(spec, PolicyEnv()).name == spec
