"""The wake table (issue 21): what the first step after an idle engine adds. Its format,
its lookup, the price function and the simulator that charge it, the validator that
charges it to the same live steps, and the profiler's aggregation (no vLLM needed)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest

from nightjar.core.records import StepRecord
from nightjar.errors import NightjarInputError
from nightjar.fidelity.compare import priced_steps
from nightjar.live.profiling.build import EngineRun, Window, prefill_cells, wake_rows
from nightjar.live.profiling.grid import ProfilePlan
from nightjar.live.profiling.session import WAKE_SAMPLES, window_count
from nightjar.profile.profile import DEFAULT_PROFILE, Profile, load_profile
from nightjar.sim import SimConfig, simulate
from nightjar.sim.price import StepShape, price_step
from nightjar.trace.trace import Trace

# [idle_s, added_ms]: nothing up to half a second, then 60 ms, 100 ms from 2 s on.
WAKE = [[0.5, 0.0], [1.0, 60.0], [2.0, 100.0]]


def _with_wake(rows: Any) -> dict[str, Any]:
    data = load_profile(DEFAULT_PROFILE).to_json()
    data["wake"] = rows
    return data


@pytest.fixture(scope="module")
def woken() -> Profile:
    return Profile.from_json(_with_wake(WAKE), "wake")


def test_the_lookup_is_linear_from_nothing_and_flat_past_the_last_row(woken: Profile) -> None:
    assert woken.wake_s(0.0) == 0.0 and woken.wake_s(0.5) == 0.0
    assert woken.wake_s(0.75) == pytest.approx(0.030)
    assert woken.wake_s(1.0) == pytest.approx(0.060)
    assert woken.wake_s(1.5) == pytest.approx(0.080)
    assert woken.wake_s(30.0) == woken.wake_s(math.inf) == pytest.approx(0.100)
    plain = load_profile(DEFAULT_PROFILE)
    assert plain.wake_s(math.inf) == 0.0 and plain.wake_from_s == math.inf
    # From (0, 0) when the first row already adds something.
    early = Profile.from_json(_with_wake([[1.0, 40.0]]), "early")
    assert early.wake_from_s == 0.0 and early.wake_s(0.25) == pytest.approx(0.010)


@pytest.mark.parametrize("rows, problem", [
    ([[0.0, 10.0]], "idle times"),
    ([[1.0, 10.0], [1.0, 20.0]], "idle times"),
    ([[7200.0, 10.0]], "idle times"),
    ([[1.0, -5.0]], "added_ms"),
    ([[1.0]], r"wake\[0\]"),
    ([], "non-empty"),
])
def test_a_bad_wake_table_is_one_line(rows: Any, problem: str) -> None:
    with pytest.raises(NightjarInputError, match=problem) as err:
        Profile.from_json(_with_wake(rows), "bad")
    assert "\n" not in str(err.value) and "'wake" in str(err.value)


def test_the_price_adds_the_wake_to_a_step_after_idle_only(woken: Profile) -> None:
    shape = StepShape(n_decode=0, g_max=0, drafted=0, mean_ctx=0.0, prefill_tokens=256,
                      draft_loaded=False, sync=False)
    busy = price_step(woken, shape)
    late = price_step(woken, dataclasses.replace(shape, idle_s=2.0))
    assert busy.wake_s == 0.0 and late.wake_s == pytest.approx(0.100)
    assert late.total_s == pytest.approx(busy.total_s + 0.100)
    # The profile without the table prices the same step the same either way.
    plain = load_profile(DEFAULT_PROFILE)
    assert price_step(plain, dataclasses.replace(shape, idle_s=2.0)) == price_step(
        plain, shape)


def _spaced(gaps: list[float]) -> Trace:
    """One short request after each gap: every one meets an idle engine."""
    n = len(gaps)
    return Trace(
        name="spaced", seed=0, arrival_s=np.cumsum(gaps), prompt_tokens=np.full(n, 200),
        output_tokens=np.full(n, 4), workload=np.array(["sharegpt"] * n, dtype=object),
        acceptance=np.full(n, np.nan),
    )


def test_the_simulator_charges_each_first_step_after_idle_its_wake(woken: Profile) -> None:
    trace = _spaced([0.0, 3.0, 0.75, 3.0])
    plain = load_profile(DEFAULT_PROFILE)
    runs = [simulate(trace, p, "nospec", SimConfig(seed=3)) for p in (plain, woken)]
    frames = [r.requests_frame() for r in runs]
    extra = [(f["first_token_s"] - f["arrival_s"]).to_numpy() for f in frames]
    # The idle before each request's first step: the gap less the last request's
    # service, so the request after 0.75 s falls on the wake's slope.
    idle = np.r_[math.inf, trace.arrival_s[1:] - frames[1]["finish_s"].to_numpy()[:-1]]
    assert extra[1] - extra[0] == pytest.approx([woken.wake_s(x) for x in idle], abs=1e-9)
    assert extra[1][0] - extra[0][0] == pytest.approx(0.100)
    assert 0.0 < extra[1][2] - extra[0][2] < 0.030
    # Steps after the first of each request follow a step at once: priced the same.
    steps = [r.steps_frame()["step_time_s"].to_numpy() for r in runs]
    assert np.count_nonzero(steps[1] - steps[0]) == 4


def test_sim_and_validator_charge_the_same_steps(woken: Profile) -> None:
    # Bursts of requests 10 ms apart (the engine never idles long) and two long gaps.
    trace = _spaced([0.0] + [0.01] * 9 + [4.0] + [0.01] * 9 + [1.5])
    run = simulate(trace, woken, "fixed:3", SimConfig(seed=1))
    priced = priced_steps(run, woken, sync=False)
    # The simulator's own run, replayed: every step priced as it ran, wake included.
    assert priced["error_pct"].abs().max() < 1e-6
    assert np.isinf(priced["idle_s"].iloc[0])
    # Without the table, the same steps price lower by the wake, where the idle passed
    # half a second only: the run's first step and those after the two gaps.
    bare = priced_steps(run, load_profile(DEFAULT_PROFILE), sync=False)
    added = (priced["priced_s"] - bare["priced_s"]).to_numpy()
    assert added == pytest.approx([woken.wake_s(x) for x in priced["idle_s"]], abs=1e-12)
    assert np.count_nonzero(added) == 3


def _step(t: float, dur: float, prefill: int) -> StepRecord:
    return StepRecord(t, dur, 0, 0, 0, prefill, 0, 0, 1, 0, 100, "none")


def test_the_profiler_reads_the_wake_off_paused_and_back_to_back_windows() -> None:
    windows, steps, t = [], [], 0.0
    # Per pause, two windows after it (120 and 140 ms) and their twins (100 ms each).
    for pause, slow in ((0.5, (0.120, 0.140)), (2.0, (0.180, 0.200))):
        for dur in slow:
            for idle, d in ((pause, dur), (0.0, 0.100)):
                t += idle + 0.01
                windows.append(Window("wake", 1, 64, t, t + d, pause_s=idle))
                steps.append(_step(t + 0.001, d - 0.002, 64))
                t += d
    # A prefill window is not a wake window, nor the other way round.
    windows.append(Window("prefill", 1, 64, t + 1, t + 1.2))
    steps.append(_step(t + 1.001, 0.150, 64))
    run = EngineRun(False, steps, [], windows, {}, 100)
    assert wake_rows(run) == [[0.5, pytest.approx(30.0)], [2.0, pytest.approx(90.0)]]
    assert set(prefill_cells(run)) == {64}
    assert wake_rows(EngineRun(False, [], [], [], {}, 100)) == []


def test_the_plan_counts_the_wake_windows_and_checks_the_pauses() -> None:
    base = dict(batch_sizes=(1, 8), contexts=(32,), prefill_lengths=(16, 256),
                mixed_batch_sizes=(1,), mixed_tokens=(64,), repeats=2)
    plan = ProfilePlan("t", "d", "t", "d", **base, wake_pauses=(0.5, 2.0))
    # Per repeat: 4 decode, 4 prefill, 1 mixed, 2 pauses x samples x (paused + twin).
    assert window_count(plan) == 2 * (4 + 4 + 1 + 2 * WAKE_SAMPLES * 2) + 1
    assert window_count(ProfilePlan("t", "d", "t", "d", **base, wake_pauses=())) == 19
    for bad in ((0.0,), (1.0, 1.0), (90.0,), (math.nan,)):
        with pytest.raises(NightjarInputError, match="--wake-pauses"):
            ProfilePlan("t", "d", "t", "d", wake_pauses=bad).check()


def test_a_scaled_profile_prices_every_table_times_the_factor(woken: Profile) -> None:
    slow = woken.scaled(1.5)
    assert slow.step_time_s(8, 2, 300.0) == pytest.approx(1.5 * woken.step_time_s(8, 2, 300.0))
    assert slow.draft_forward_s(8, 300.0) == pytest.approx(1.5 * woken.draft_forward_s(8, 300.0))
    assert slow.prefill_time_s(700) == pytest.approx(1.5 * woken.prefill_time_s(700))
    assert slow.wake_s(1.5) == pytest.approx(1.5 * woken.wake_s(1.5))
    assert slow.memory == woken.memory
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(NightjarInputError, match="time factor"):
            woken.scaled(bad)
