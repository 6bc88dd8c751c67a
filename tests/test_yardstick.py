"""The bound (nightjar.sim.yardstick) and the yardsticks of a result set."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from nightjar.profile.profile import load_profile
from nightjar.results.run_set import ResultSet
from nightjar.sim import DraftKVMode, SchedulerMode, SimConfig, simulate_many
from nightjar.sim.bound import MAX_STRETCH, Trajectory, bound_ptl_s
from nightjar.sim.yardstick import rebuild_rate_s
from nightjar.trace.trace import load_trace

RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"
POLICIES = ["nospec", "fixed:1", "fixed:3", "nightjar", "nightjar+", "dsd", "tetris", "oracle"]


def _schedule_cost(d: Trajectory, schedule: tuple[int, ...]) -> float:
    """The program's cost model, walked directly: sum_t w_t B_t (T + rebuild) / E."""
    total = 0.0
    stretch = 0
    share = [p / sum(d.played) for p in d.played]
    for t, g in enumerate(schedule):
        step = d.prices[t][g]
        if g > 0:
            rebuild = d.rebuild[t]
            step += rebuild[min(stretch, MAX_STRETCH)] if rebuild is not None else 0.0
            stretch = 0
        else:
            stretch += 1
        total += share[t] * d.batch[t] * step / d.tokens[t][g]
    return total


def test_the_program_finds_the_best_schedule_of_a_small_trajectory() -> None:
    rng = np.random.default_rng(0)
    for trial in range(20):
        n, gammas = 7, 3
        d = Trajectory()
        for _ in range(n):
            d.batch.append(int(rng.integers(1, 9)))
            d.prices.append(np.sort(rng.uniform(0.01, 0.03, gammas)))
            d.tokens.append(np.cumsum(rng.uniform(0.2, 1.0, gammas)) * d.batch[-1])
            # A rebuild grows with the stretch it ends: 0 after a speculating step.
            d.rebuild.append(np.arange(MAX_STRETCH + 1) * rng.uniform(0.0, 0.02))
        d.played = list(rng.uniform(1.0, 5.0, n))
        d.step_s = [0.0] * n
        brute = min(_schedule_cost(d, s) for s in itertools.product(range(gammas), repeat=n))
        assert bound_ptl_s(d) == pytest.approx(brute, rel=1e-9), trial


@pytest.mark.parametrize("engine,draft_kv", [("v0", "skip"), ("v1", "sync"), ("v1", "skip")])
def test_no_policy_beats_the_bound_on_its_own_trajectory(engine: str, draft_kv: str) -> None:
    trace, profile = load_trace("alpaca-burst"), load_profile(RTX)
    cfg = SimConfig(seed=1, gamma_max=3, engine=SchedulerMode(engine),
                    draft_kv_mode=DraftKVMode(draft_kv))
    results = simulate_many(trace, profile, POLICIES, cfg)
    rs = ResultSet.build(results)
    for run in rs.runs:
        y = run.yardsticks
        assert y is not None
        own, bound = run.result.extra["expected_ptl_s"], run.result.extra["bound_ptl_s"]
        # Per-request lengths (tetris) are outside the program's batch-gamma schedules.
        if run.policy != "tetris":
            assert y.bound_pct >= -1e-9, (run.policy, y.bound_pct)
        # The run's expected per-token latency is its realised one up to sampling luck.
        assert own == pytest.approx(y.ptl_s, rel=0.02), run.policy
        assert 0 < bound <= own * 1.05
        # The static yardstick is the best of the static runs (nospec, fixed:*).
        assert y.static in ("nospec", "fixed:1", "fixed:3")
    gains = {r.policy: r.yardsticks.static_gain_pct for r in rs.runs if r.yardsticks}
    assert max(gains[p] for p in ("nospec", "fixed:1", "fixed:3")) == 0.0


def test_the_bound_charges_the_rebuild_a_myopic_choice_ignores() -> None:
    # Skip mode on the RTX 4090 pair: the per-step oracle toggles and pays rebuilds
    # (a myopic choice); the bound may not be above what the oracle's own schedule cost.
    trace, profile = load_trace("burst"), load_profile(RTX)
    cfg = SimConfig(seed=0, gamma_max=3, engine=SchedulerMode.V0,
                    draft_kv_mode=DraftKVMode.SKIP)
    oracle = simulate_many(trace, profile, ["oracle"], cfg)[0]
    rebuilds = sum(s.switch_cost_s * s.batch_size for s in oracle.steps)
    assert rebuilds > 0
    assert oracle.extra["bound_ptl_s"] < oracle.extra["expected_ptl_s"]


def test_rebuild_rate_is_a_lower_envelope_of_the_draft_prefill() -> None:
    profile = load_profile(RTX)
    rate = rebuild_rate_s(profile)
    assert rate > 0
    for n in (1, 7, 64, 500, 4096, 20_000):
        from nightjar.profile.prefill import chunked_prefill_s

        cost = chunked_prefill_s(profile.draft_prefill_time_s, n, profile.max_prefill_tokens)
        assert cost >= rate * n * (1 - 1e-12)
    assert math.isfinite(rate)


def test_the_streamed_program_does_not_depend_on_the_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    # The recorder prices and walks CHUNK steps at a time: chunk edges (the program's
    # state, the rebuild's step indices, the excess windows) must not move a figure.
    import nightjar.sim.bound as bound

    trace, profile = load_trace("burst"), load_profile(RTX)
    cfg = SimConfig(seed=0, gamma_max=3, engine=SchedulerMode.V0,
                    draft_kv_mode=DraftKVMode.SKIP)
    whole = simulate_many(trace, profile, ["nightjar+", "oracle"], cfg)
    assert all(len(r.steps) > 1000 for r in whole)
    monkeypatch.setattr(bound, "CHUNK", 37)
    pieces = simulate_many(trace, profile, ["nightjar+", "oracle"], cfg)
    for a, b in zip(whole, pieces, strict=True):
        keys = [k for k in a.extra if k.endswith("_ptl_s") or k.startswith("excess_pct")]
        assert len(keys) == 7
        for k in keys:
            assert b.extra[k] == pytest.approx(a.extra[k], rel=1e-12, nan_ok=True), k
