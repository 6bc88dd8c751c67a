"""nightjar+'s step-time model: corrections transfer across gammas and batch sizes."""

from __future__ import annotations

import numpy as np
import pytest

from nightjar.core.estimators import ForgettingRidge, expected_tokens
from nightjar.core.policy import PolicyEnv
from nightjar.policies.harness import KneeLatency, run_loop
from nightjar.policies.registry import make_policy
from nightjar.policies.step_times import NeutralBasis, ProfileBasis, StepModel
from nightjar.profile.priors import BatchScaledLatency, ScaledLatency, SpecScaledLatency
from nightjar.profile.profile import load_profile
from nightjar.sim import DraftKVMode, SchedulerMode, SimConfig, simulate
from nightjar.trace.trace import load_trace

RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"
CTX = 512.0


def test_ridge_recovers_a_linear_law_and_returns_to_the_prior_where_data_say_nothing() -> None:
    fit = ForgettingRidge(3, 1.0)
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = [1.0, float(rng.uniform(1, 10)), 0.0]  # the third feature never varies
        fit.add(x, 2.0 + 0.5 * x[1], 1.0)
    theta = fit.solve([0.0, 0.0, 7.0], [1e-6, 1e-6, 1.0])
    assert theta[0] == pytest.approx(2.0, abs=1e-3) and theta[1] == pytest.approx(0.5, abs=1e-4)
    assert theta[2] == pytest.approx(7.0)  # unexcited: the prior mean


def _learn(model: StepModel, truth: KneeLatency | object, plan: list[tuple[int, int]],
           repeat: int = 30) -> None:
    for _ in range(repeat):
        for b, g in plan:
            model.learn(b, g, truth.step_time_s(b, g, CTX), CTX)  # type: ignore[attr-defined]


@pytest.mark.parametrize("factor", [0.7, 1.3])
def test_a_scaled_table_is_corrected_at_every_gamma_by_steps_at_one(factor: float) -> None:
    truth = load_profile(RTX)
    model = StepModel(ProfileBasis(ScaledLatency(truth, factor), 3), 3)
    _learn(model, truth, [(64, 3)])  # only gamma 3 ever runs
    for g in range(4):
        assert model.times(64, CTX)[g] == pytest.approx(truth.step_time_s(64, g, CTX), rel=0.02)


def test_a_wrong_cost_of_speculating_is_split_from_the_scale_by_two_gammas() -> None:
    truth = load_profile(RTX)
    model = StepModel(ProfileBasis(SpecScaledLatency(truth, 0.7), 3), 3)
    _learn(model, truth, [(32, 0), (32, 2)])
    for g in range(4):
        assert model.times(32, CTX)[g] == pytest.approx(truth.step_time_s(32, g, CTX), rel=0.03)


H100_TP2 = "h100-80gb-tp2/deepseek-r1-distill-qwen-32b+qwen2.5-0.5b"


def test_an_exact_table_stays_exact_while_context_grows_under_gamma_0() -> None:
    """A table that is the truth must price gamma 1 right after a long stretch of gamma
    0 at growing contexts (H100-TP2 at B 250: its prior read a quantum away from the
    observed context put gamma 1 2-5% dear and kept speculation off for 50 s)."""
    truth = load_profile(H100_TP2)
    model = StepModel(ProfileBasis(truth, 4), 4)
    b = 250
    for i in range(300):  # speculation ran at short contexts ...
        ctx = 280.0 + (i % 40)
        model.learn(b, 1, truth.step_time_s(b, 1, ctx), ctx)
    for i in range(1500):  # ... then gamma 0 alone while the answers grew
        ctx = 300.0 + 220.0 * i / 1500
        model.learn(b, 0, truth.step_time_s(b, 0, ctx), ctx)
    for ctx in (450.0, 515.0):
        for g in (0, 1):
            assert model.times(b, ctx)[g] == pytest.approx(truth.step_time_s(b, g, ctx), rel=0.003)


def test_the_prior_is_read_at_the_observed_context() -> None:
    truth = load_profile(H100_TP2)
    basis = ProfileBasis(truth, 4)
    for ctx in (0.0, 100.0, 300.0, 333.3, 512.0, 1000.5):
        exact = [truth.step_time_s(250, g, ctx) for g in range(5)]
        assert basis.prior_times(250, ctx) == pytest.approx(exact, rel=2e-3)


def test_a_batch_dependent_error_is_corrected_where_each_batch_ran() -> None:
    truth = load_profile(RTX)
    model = StepModel(ProfileBasis(BatchScaledLatency(truth, 1.3, 0.8), 3), 3)
    _learn(model, truth, [(4, 3), (128, 0)])
    # The gammas that ran are exact; the others move with them. Two (B, gamma) points
    # cannot tell the scale's slope in B from a fixed overhead, so an untried gamma
    # is within 8%, not exact (a prior read as uncorrected would be 20-30% off).
    for b, g in ((4, 3), (128, 0)):
        assert model.times(b, CTX)[g] == pytest.approx(truth.step_time_s(b, g, CTX), rel=1e-3)
    for b in (4, 128):
        for g in range(4):
            assert model.times(b, CTX)[g] == pytest.approx(
                truth.step_time_s(b, g, CTX), rel=0.08), (b, g)


def test_without_a_prior_the_cost_learned_at_small_batches_prices_a_large_one() -> None:
    # A compute-bound engine (every token costs the same, a CPU): the neutral model's
    # per-token weight is shared by decode and verify tokens, so gamma 0 at B = 4 and
    # gamma 2 at B = 16 price B = 48, which never ran, at every gamma.
    cpu = KneeLatency(base_s=0.004, draft_s=0.002, per_token_s=0.003, knee=0)
    model = StepModel(NeutralBasis(), 3)
    _learn(model, cpu, [(4, 0), (16, 2), (8, 1)])
    for g in range(4):
        assert model.times(48, CTX)[g] == pytest.approx(cpu.step_time_s(48, g, CTX), rel=0.05)


def test_without_a_prior_it_stops_speculating_where_verification_is_dear_even_first_seen(
) -> None:
    # Speculation pays at B = 1 and loses at B = 40 on this engine; the policy first
    # meets B = 40 after a long run at B = 1 where it speculated.
    cpu = KneeLatency(base_s=0.004, draft_s=0.001, per_token_s=0.002, knee=4)
    assert cpu.best_gamma(1, 0.7, 3) > 0 and cpu.best_gamma(40, 0.7, 3) == 0
    pol = make_policy("nightjar+", PolicyEnv(gamma_max=3, seed=0, latency=None))
    trace = run_loop(pol, cpu, lambda t: 1 if t < 1500 else 40, lambda t, b: [0.7] * b, 2500,
                     gamma_max=3)
    assert trace.share(0, 0, 1500) < 0.1
    assert trace.share(0, 1600) > 0.9


class _Noisy:
    """Multiplicative lognormal noise on every step (a loaded machine)."""

    def __init__(self, base: KneeLatency, sigma: float) -> None:
        self.base, self.sigma = base, sigma
        self.rng = np.random.default_rng(3)

    def step_time_s(self, b: int, g: int, c: float) -> float:
        return self.base.step_time_s(b, g, c) * float(np.exp(self.rng.normal(0.0, self.sigma)))


def test_noisy_steps_still_lead_to_the_best_gamma() -> None:
    # Steps 40% noisy (lognormal sigma), no table: the second half's choices cost under
    # 3% more per token than the best gamma's, on average over 6 seeds. One seed alone
    # ranges 1.3-3.6% at CELL_MEMORY 100 (0.9-2.4% at 200; docs/policies.md).
    lat = KneeLatency()
    sizes = [1, 8, 64, 256]

    def cost(b: int, g: int) -> float:
        return lat.step_time_s(b, g, CTX) / expected_tokens(0.7, g)

    excess = []
    for seed in range(6):
        pol = make_policy("nightjar+", PolicyEnv(gamma_max=3, seed=seed, latency=None))
        trace = run_loop(pol, _Noisy(lat, 0.4), lambda t: sizes[(t // 50) % 4],
                         lambda t, b: [0.7] * b, 4000, gamma_max=3)
        excess += [cost(b, g) / min(cost(b, k) for k in range(4)) - 1.0
                   for b, g in zip(trace.batch[2000:], trace.gamma[2000:], strict=True)]
    assert float(np.mean(excess)) < 0.03


@pytest.mark.parametrize("prior", ["scale:1.3", "none"])
def test_the_issues_headline_a_wrong_or_missing_table_costs_under_a_point(prior: str) -> None:
    # The issue's setting (the paper's engine, the RTX 4090 pair), one seed: a table
    # 30% too slow made nightjar+ speculate 96-98% of the time instead of ~27%.
    trace, profile = load_trace("burst"), load_profile(RTX)
    cfg = SimConfig(seed=0, gamma_max=3, engine=SchedulerMode.V0, draft_kv_mode=DraftKVMode.SKIP)
    exact = simulate(trace, profile, "nightjar+", cfg)
    wrong = simulate(trace, profile, "nightjar+", cfg, prior=prior)
    from nightjar.results.metrics import summarize
    from nightjar.results.regret import bound_regret_pct, per_token_latency

    assert per_token_latency(wrong) <= per_token_latency(exact) * 1.01
    assert abs(bound_regret_pct(wrong) - bound_regret_pct(exact)) < 1.0
    share = summarize(wrong).spec_time_share - summarize(exact).spec_time_share
    assert abs(share) < 0.05 if prior != "none" else abs(share) < 0.15
