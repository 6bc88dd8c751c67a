"""The seed-interval helpers every multi-seed comparison relies on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nightjar.results.stats import compare, mean_interval, t_critical_95


def test_t_critical_matches_table_and_tends_to_normal() -> None:
    assert t_critical_95(1) == pytest.approx(12.7062)
    assert t_critical_95(4) == pytest.approx(2.7764)
    # Beyond the table: known values t(40) = 2.0211, t(120) = 1.9799.
    assert t_critical_95(40) == pytest.approx(2.0211, abs=2e-4)
    assert t_critical_95(120) == pytest.approx(1.9799, abs=2e-4)
    with pytest.raises(ValueError):
        t_critical_95(0)


def test_interval_covers_the_true_mean_about_95_percent() -> None:
    rng = np.random.default_rng(0)
    covered = 0
    trials = 2000
    for _ in range(trials):
        iv = mean_interval(rng.normal(10.0, 3.0, size=5).tolist())
        covered += iv.lo <= 10.0 <= iv.hi
    assert 0.93 <= covered / trials <= 0.97


def test_single_run_and_nan_handling() -> None:
    one = mean_interval([3.0])
    assert (one.mean, one.lo, one.hi, one.n) == (3.0, 3.0, 3.0, 1)
    assert one.format() == "3.00"
    assert mean_interval([1.0, math.nan, 3.0]).n == 2
    assert math.isnan(mean_interval([]).mean)


def test_compare_claims_only_when_intervals_separate() -> None:
    a = mean_interval([10.0, 10.1, 9.9, 10.05, 9.95])
    b = mean_interval([12.0, 12.1, 11.9, 12.05, 11.95])
    c = mean_interval([9.0, 11.0, 10.5, 9.5, 12.0])
    assert compare(b, a) == ">" and compare(a, b) == "<"
    assert compare(a, c) == "~"
    # One run each: never a claim, however far apart.
    assert compare(mean_interval([1.0]), mean_interval([100.0])) == "~"
    assert "±" in a.format()
