"""The forgetting ridge regression (nightjar.core.estimators): its written-out k = 4 paths
must equal the general loops bit for bit, and the solve must solve."""

from __future__ import annotations

import numpy as np
import pytest

from nightjar.core.estimators import ForgettingRidge, _solve, _solve4


def _fitted(k: int, seed: int, steps: int = 200) -> ForgettingRidge:
    rng = np.random.default_rng(seed)
    fit = ForgettingRidge(k, 0.99)
    for _ in range(steps):
        x = rng.uniform(-1.0, 2.0, k).tolist()
        if rng.random() < 0.2:
            x[int(rng.integers(k))] = 0.0  # a zero below a pivot: the skipped update
        fit.add(x, float(rng.uniform(0.01, 0.2)), float(rng.uniform(0.5, 3.0)))
    return fit


@pytest.mark.parametrize("seed", range(20))
def test_the_written_out_solve_is_the_loop_bit_for_bit(seed: int) -> None:
    fit = _fitted(4, seed)
    rng = np.random.default_rng(100 + seed)
    mean = rng.normal(size=4).tolist()
    precision = rng.uniform(0.01, 5.0, 4).tolist()
    got = _solve4(fit._a, fit._b, mean, precision)
    assert got == _solve(fit._a, fit._b, mean, precision)
    # And it solves (A + P) theta = b + P m.
    a = np.array(fit._a) + np.diag(precision)
    np.testing.assert_allclose(a @ np.array(got), np.array(fit._b) + np.multiply(precision, mean),
                               rtol=1e-9, atol=1e-12)


def test_the_written_out_add_is_the_loop_bit_for_bit() -> None:
    rng = np.random.default_rng(7)
    fit = ForgettingRidge(4, 0.995)
    a = [[0.0] * 4 for _ in range(4)]
    b = [0.0] * 4
    for _ in range(300):
        x, y, w = rng.normal(size=4).tolist(), float(rng.normal()), float(rng.uniform(0.1, 2))
        fit.add(x, y, w)
        for i in range(4):  # the general loop, as written for any k
            wx = w * x[i]
            b[i] = 0.995 * b[i] + wx * y
            for j in range(4):
                a[i][j] = 0.995 * a[i][j] + wx * x[j]
    assert fit._a == a and fit._b == b
