"""The acceptance model matches its closed form within sampling error."""

import numpy as np
import pytest

from nightjar.core.estimators import expected_tokens
from nightjar.sim.acceptance import sample_accepted
from nightjar.sim.knobs import AcceptanceModel


@pytest.mark.parametrize("alpha", [0.2, 0.6, 0.9])
@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_geometric_mean_tokens_per_step(alpha: float, gamma: int) -> None:
    n = 200_000
    rng = np.random.default_rng(1)
    acc = sample_accepted(rng, np.full(n, alpha), np.full(n, gamma), AcceptanceModel.GEOMETRIC, 1.0)
    tokens = acc + 1
    expected = expected_tokens(alpha, gamma)
    stderr = tokens.std() / np.sqrt(n)
    assert abs(tokens.mean() - expected) < 4 * stderr + 1e-9
    assert acc.min() >= 0 and acc.max() <= gamma


def test_positional_with_no_decay_equals_geometric_in_law() -> None:
    n = 100_000
    alpha, gamma = 0.7, 4
    rng = np.random.default_rng(2)
    acc = sample_accepted(
        rng, np.full(n, alpha), np.full(n, gamma), AcceptanceModel.POSITIONAL, 1.0
    )
    tokens = acc + 1
    assert abs(tokens.mean() - expected_tokens(alpha, gamma)) < 4 * tokens.std() / np.sqrt(n)


def test_positional_decay_front_loads_acceptance() -> None:
    n = 100_000
    rng = np.random.default_rng(3)
    alpha, gamma = np.full(n, 0.8), np.full(n, 4)
    flat = sample_accepted(rng, alpha, gamma, AcceptanceModel.POSITIONAL, 1.0)
    decayed = sample_accepted(rng, alpha, gamma, AcceptanceModel.POSITIONAL, 0.8)
    # Same first-position rate, fewer deep acceptances.
    assert abs((flat >= 1).mean() - (decayed >= 1).mean()) < 0.01
    assert (decayed == 4).mean() < 0.5 * (flat == 4).mean()


def test_per_request_gamma_caps_each_request() -> None:
    rng = np.random.default_rng(4)
    gamma = np.array([0, 1, 2, 5] * 1000)
    for model in AcceptanceModel:
        acc = sample_accepted(rng, np.full(gamma.size, 0.99), gamma, model, 1.0)
        assert (acc <= gamma).all()
        assert (acc[gamma == 0] == 0).all()


def test_empty_batch() -> None:
    rng = np.random.default_rng(5)
    out = sample_accepted(
        rng, np.zeros(0), np.zeros(0, dtype=np.int64), AcceptanceModel.GEOMETRIC, 1.0
    )
    assert out.shape == (0,)


def test_the_engine_draws_are_the_generator_stream_step_by_step() -> None:
    """AcceptanceDraws takes log(U) in blocks; across a block's end, each step's draws
    are still those that ``rng.random(n)`` step by step would give."""
    from nightjar.sim.acceptance import UNIFORM_BLOCK, AcceptanceDraws

    draws = AcceptanceDraws(5, AcceptanceModel.GEOMETRIC, 1.0)
    rng = np.random.default_rng([5, 11])
    log_alpha = np.log(np.full(1000, 0.7))
    for n in (1000,) * (UNIFORM_BLOCK // 1000) + (1000, 7):
        want = np.minimum(np.log(rng.random(n)) / log_alpha[:n], 3).astype(np.int64)
        assert np.array_equal(draws.geometric(3, log_alpha[:n]), want)
