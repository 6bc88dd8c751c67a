"""Issue 15: the live policies' lookups beyond the profile's grid (priced off it by
``Clamped``) reach the run's summary and the printed output, as the simulator's
``context_clamped_steps`` does. Runs without vLLM: the scheduler's part is the
``Clamped`` object and the step log's summary record, both exercised here."""

from __future__ import annotations

from pathlib import Path

from nightjar.core.records import RunResult
from nightjar.live.profiling.latency import Clamped
from nightjar.live.steplog import StepLog, read_log
from nightjar.profile.profile import DEFAULT_PROFILE, load_profile
from nightjar.report.off_grid import off_grid_lines
from nightjar.results.metrics import summarize


def test_off_grid_steps_count_steps_with_at_least_one_edge_lookup() -> None:
    base = load_profile(DEFAULT_PROFILE)
    lat = Clamped(base)
    lat.step_time_s(4, 2, 512.0)
    lat.end_step()  # inside the grid
    lat.step_time_s(4, 2, 1e9)
    lat.draft_forward_s(4, float("nan"))  # an unknown context: the smallest
    lat.end_step()  # two lookups off the grid, one step
    lat.end_step()  # no lookup at all
    lat.step_time_s(base.max_batch_size * 4, 0, 512.0)
    lat.end_step()
    assert lat.summary() == {"off_grid_lookups": 3.0, "off_grid_steps": 2.0}


def test_the_counter_reaches_the_live_summary_and_the_printed_lines(tmp_path: Path) -> None:
    lat = Clamped(load_profile(DEFAULT_PROFILE))
    lat.step_time_s(10_000, 1, 512.0)  # beyond the largest batch
    lat.end_step()
    path = tmp_path / "steps.jsonl"
    log = StepLog(str(path))
    # What the scheduler writes at shutdown: the controller's summary and the counter.
    log.write("summary", offloads=0, **lat.summary())
    log.close()
    extra = read_log(path).summary  # what nightjar.live.replay puts in RunResult.extra
    result = RunResult(policy="nightjar+", engine="live", trace="t", profile="p", seed=0,
                       duration_s=1.0, requests=[], steps=[], extra=dict(extra))
    row = summarize(result).as_dict()
    assert row["off_grid_lookups"] == 1.0 and row["off_grid_steps"] == 1.0
    assert off_grid_lines([result]) == [
        "nightjar+: 1 profile lookups in 1 steps lay outside the profile's table and were "
        "priced off its grid (off_grid_lookups)"
    ]
    inside = RunResult(policy="nospec", engine="live", trace="t", profile="p", seed=0,
                       duration_s=1.0, requests=[], steps=[], extra={"off_grid_lookups": 0.0})
    assert off_grid_lines([inside]) == []
