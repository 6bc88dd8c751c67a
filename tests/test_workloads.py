"""Workload length and acceptance distributions hit their documented shapes."""

from __future__ import annotations

import numpy as np
import pytest

from nightjar.errors import NightjarInputError
from nightjar.trace.workloads import MAX_ACCEPTANCE, WORKLOADS, LengthDist, get_workload

# Documented targets (docs/traces.md): prompt mean, output mean, acceptance mean.
TARGETS = {
    "sharegpt": (161, 338, 0.60),
    "alpaca": (19, 58, 0.65),
    "specbench": (350, 250, 0.55),
}


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_workload_means_within_tolerance(name: str) -> None:
    w = get_workload(name)
    prompt, output = w.sample_lengths(np.random.default_rng(1), 50_000)
    p_mean, o_mean, a_mean = TARGETS[name]
    assert prompt.dtype == np.int64 and output.dtype == np.int64
    assert prompt.min() >= w.prompt.lo and prompt.max() <= w.prompt.hi
    assert output.min() >= 1 and output.max() <= w.output.hi
    assert prompt.mean() == pytest.approx(p_mean, rel=0.03)
    assert output.mean() == pytest.approx(o_mean, rel=0.03)
    # Long tail: the median sits well under the mean.
    assert np.median(output) < 0.9 * output.mean()
    acc = w.sample_acceptance(np.random.default_rng(2), 50_000)
    assert acc.mean() == pytest.approx(a_mean, abs=0.01)
    assert acc.min() >= 0 and acc.max() <= MAX_ACCEPTANCE


def test_specbench_has_wider_acceptance_spread() -> None:
    rng = np.random.default_rng(3)
    spreads = {n: get_workload(n).sample_acceptance(rng, 20_000).std() for n in TARGETS}
    assert spreads["specbench"] > 1.5 * spreads["sharegpt"]


def test_acceptance_overrides_and_clip() -> None:
    w = get_workload("sharegpt")
    acc = w.sample_acceptance(np.random.default_rng(0), 20_000, mean=0.98, concentration=50)
    assert acc.max() == pytest.approx(MAX_ACCEPTANCE)
    assert w.sample_acceptance(np.random.default_rng(0), 20_000, mean=0.3).mean() == (
        pytest.approx(0.3, abs=0.01)
    )
    with pytest.raises(NightjarInputError):
        w.sample_acceptance(np.random.default_rng(0), 5, mean=1.0)


def test_sampling_is_deterministic_per_seed() -> None:
    w = WORKLOADS["alpaca"]
    a = w.sample_lengths(np.random.default_rng(7), 100)
    b = w.sample_lengths(np.random.default_rng(7), 100)
    c = w.sample_lengths(np.random.default_rng(8), 100)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_unknown_workload_names_the_known_ones() -> None:
    with pytest.raises(NightjarInputError, match=r"unknown workload 'shargpt'.*sharegpt"):
        get_workload("shargpt")


def test_length_dist_from_json() -> None:
    d = LengthDist.from_json({"dist": "lognormal", "mean": 100, "sigma": 0.5, "max": 400}, "x")
    s = d.sample(np.random.default_rng(0), 20_000)
    assert s.mean() == pytest.approx(100, rel=0.03) and s.max() <= 400
    u = LengthDist.from_json({"dist": "uniform", "min": 5, "max": 9}, "x")
    assert set(u.sample(np.random.default_rng(0), 1000).tolist()) == {5, 6, 7, 8, 9}
    c = LengthDist.from_json({"dist": "constant", "value": 64}, "x")
    assert set(c.sample(np.random.default_rng(0), 10).tolist()) == {64}
    for bad, msg in [
        ({"dist": "normal"}, "dist must be one of"),
        ({"dist": "uniform", "min": 5, "max": 9, "mean": 3}, "unknown field 'mean'"),
        ({"dist": "lognormal", "mean": 100, "sigma": 0}, r"sigma must be in \(0, 10\]"),
        ({"dist": "lognormal", "mean": 100, "sigma": 1e300}, r"sigma must be in \(0, 10\]"),
        ({"dist": "uniform", "min": 1, "max": 2**70}, "max must be <="),
        ({"dist": "lognormal", "mean": 5000, "sigma": 1}, "outside"),
        ({"dist": "uniform", "min": 0, "max": 9}, "lo <= hi"),
        ({"dist": "constant", "value": "x"}, "must be a finite number"),
    ]:
        with pytest.raises(NightjarInputError, match=msg):
            LengthDist.from_json(bad, "seg")
