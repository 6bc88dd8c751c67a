"""The paper's contextual bandit on synthetic latency tables where the answer is known."""

from __future__ import annotations

from collections import Counter

import pytest

from nightjar.core.policy import PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.harness import KneeLatency, run_loop
from nightjar.policies.nightjar_bandit import NightjarPolicy, _Schedule
from nightjar.policies.registry import make_policy

LAT = KneeLatency()


def _mode(values: list[int]) -> int:
    return Counter(values).most_common(1)[0][0]


def test_schedule_blocks_double_and_bins_are_about_sqrt() -> None:
    s = _Schedule()
    seen: list[tuple[int, int, int]] = []
    rounds = 0
    while s.block < 8:
        s.next_bin()
        seen.append((s.block, s.bin_len, s.left))
        rounds += s.left
        s.left = 0
    # Blocks 1..7 hold 2^(j-1) rounds each, so 127 rounds before block 8 starts.
    assert rounds - seen[-1][2] == 127
    for block, bin_len, left in seen:
        assert bin_len == max(1, round((2 ** (block - 1)) ** 0.5))
        assert 1 <= left <= bin_len


def test_converges_to_the_best_gamma_per_batch_size() -> None:
    sizes = [1, 16, 32, 256]
    pol = make_policy("nightjar", PolicyEnv(gamma_max=4, seed=3))
    trace = run_loop(pol, LAT, lambda t: sizes[(t // 25) % 4], lambda t, b: [0.8] * b, 16000)
    for b in sizes:
        late = [g for t, g in enumerate(trace.gamma) if t >= 8000 and trace.batch[t] == b]
        assert _mode(late) == LAT.best_gamma(b, 0.8), b


def test_reenables_speculation_after_a_load_drop() -> None:
    pol = make_policy("nightjar", PolicyEnv(gamma_max=4, seed=1))
    phases = [(0, 1), (3000, 256), (6000, 1)]

    def batch(t: int) -> int:
        return [b for start, b in phases if t >= start][-1]

    trace = run_loop(pol, LAT, batch, lambda t, b: [0.8] * b, 9000)
    assert trace.share(0, 4500, 6000) > 0.6  # heavy load: speculation mostly off
    assert 1.0 - trace.share(0, 7500) > 0.8  # light again: back on, no deadlock


def test_reenables_in_the_same_context_when_the_best_arm_moves() -> None:
    # B = 64 throughout: first drafts are poor (gamma 0 best), then excellent (3 best).
    pol = make_policy("nightjar", PolicyEnv(gamma_max=4, seed=2))
    trace = run_loop(pol, LAT, lambda t: 64, lambda t, b: [0.3 if t < 4000 else 0.95] * b, 9000)
    assert trace.share(0, 2000, 4000) > 0.5
    assert 1.0 - trace.share(0, 7000) > 0.6


class TieLatency:
    """At acceptance 0.5, gamma 0 and gamma 1 cost exactly the same per token."""

    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float:
        return 0.01 * (1.0 + 0.5 * gamma)


@pytest.mark.parametrize(("spec", "seed"), [("nightjar", 0), ("nightjar", 1), ("nightjar+", 0)])
def test_large_switch_cost_means_fewer_toggles(spec: str, seed: int) -> None:
    def toggles(cost: float) -> int:
        pol = make_policy(spec, PolicyEnv(gamma_max=4, seed=seed, latency=TieLatency()))
        trace = run_loop(
            pol, TieLatency(), lambda t: 8, lambda t, b: [0.5] * b, 6000,
            switch_cost_s=cost, seed=seed,
        )
        return trace.toggles()

    free, costly = toggles(0.0), toggles(0.5)
    assert costly < 0.6 * free, (free, costly)


def test_clamped_outcomes_do_not_train_the_arm() -> None:
    pol = NightjarPolicy(gamma_max=4, seed=0)
    ctx = StepContext(0.0, 8, 0, 100, 100, True, 4)
    pol.decide(ctx)
    pol.observe(StepOutcome(0, 8, 0.5, 0, 0, 8, clamped=True))
    assert pol._count[3] == [0] * 5
    pol.observe(StepOutcome(0, 8, 0.5, 0, 0, 8))
    assert pol._count[3][0] == 1
    assert pol._loss[3][0] == pytest.approx(0.5)


def test_switch_cost_is_learned_and_excluded_from_the_arm_loss() -> None:
    pol = NightjarPolicy(gamma_max=4, seed=0)
    pol.observe(StepOutcome(0, 1, 0.01, 0, 0, 1))
    pol.observe(StepOutcome(2, 1, 0.05, 2, 2, 3, switch_cost_s=0.04))
    assert pol._switch_cost > 0.0
    assert pol._loss[0][2] == pytest.approx(0.01 / 3)


def test_offloaded_draft_gives_gamma_zero_without_spending_a_round() -> None:
    pol = NightjarPolicy(gamma_max=4, seed=0)
    assert pol.decide(StepContext(0.0, 4, 0, 10, 10, False, 4)) == 0
    assert pol._sched == {}


def test_deterministic_for_a_seed() -> None:
    def gammas(seed: int) -> list[int]:
        pol = make_policy("nightjar", PolicyEnv(gamma_max=4, seed=seed))
        return run_loop(pol, LAT, lambda t: 1 + t % 40, lambda t, b: [0.7] * b, 800).gamma

    assert gammas(5) == gammas(5)
    assert gammas(5) != gammas(6)


def test_rejects_an_argument() -> None:
    with pytest.raises(NightjarInputError, match="takes no argument"):
        make_policy("nightjar:3", PolicyEnv())


def test_exploration_with_a_zero_reference_loss_does_not_divide_by_zero() -> None:
    # A mixed step whose prefill estimate overshoots can leave a learned loss at 0
    # (found by the Table-6 runs of reports/paper); exploration then falls back to
    # uniform instead of weighing toggles against a zero loss.
    from nightjar.policies.nightjar_bandit import NightjarPolicy

    pol = NightjarPolicy(gamma_max=3, seed=0)
    pol._context(0)
    pol._switch_cost = 0.01
    pol._count[0] = [1, 1, 0, 0]
    pol._loss[0] = [0.0, 0.002, 0.0, 0.0]
    picks = {pol._pick(0, horizon=1, explore=True) for _ in range(200)}
    assert picks == {0, 1, 2, 3}
