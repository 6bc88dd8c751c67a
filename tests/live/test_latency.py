"""Step-time priors for policies in the live engine: measured step tables and
clamped profiles. Pure Python (no vLLM needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.core.records import StepRecord
from nightjar.errors import NightjarInputError
from nightjar.live.profiling.latency import Clamped, StepTable, load_latency

NEEDS_VLLM = False


def _step(b: int, g: int, t: float, prefill: int = 0, accepted: int = 0) -> StepRecord:
    return StepRecord(
        time_s=0.0,
        step_time_s=t,
        batch_size=b,
        num_waiting=0,
        gamma=g,
        prefill_tokens=prefill,
        drafted=g * b,
        accepted=accepted,
        emitted=b + accepted,
        kv_used_blocks=0,
        kv_total_blocks=10,
        draft_state="resident",
    )


def test_table_from_steps_takes_medians_and_interpolates(tmp_path: Path) -> None:
    steps = [
        _step(b, g, t * (1 + b / 10) * (1 + g))
        for b in (1, 8, 9)
        for g in (0, 1)
        for t in (0.010, 0.011, 0.030)
    ]
    steps.append(_step(8, 1, 5.0, prefill=100))  # mixed steps are not decode timings
    steps += [_step(4, 0, 0.02)] * 5  # no gamma-1 data at B = 4: dropped
    table = StepTable.from_steps(steps)
    assert table.batch_sizes == (1, 8, 9)
    assert table.step_time_s(1, 0, 0.0) == pytest.approx(0.011 * 1.1)
    assert table.step_time_s(8, 1, 0.0) == pytest.approx(0.011 * 1.8 * 2)
    mid = table.step_time_s(4, 0, 0.0)
    assert table.step_time_s(1, 0, 0.0) < mid < table.step_time_s(8, 0, 0.0)
    assert table.step_time_s(500, 1, 0.0) == table.step_time_s(9, 1, 0.0)  # flat beyond
    assert table.step_time_s(1, 7, 0.0) == table.step_time_s(1, 1, 0.0)  # gamma clamped
    path = tmp_path / "t.json"
    path.write_text(json.dumps(table.to_json()))
    loaded, _ = load_latency(str(path))
    assert loaded == table


def test_acceptance_is_the_per_position_rate() -> None:
    # 2 drafts per request per step, half of all drafts accepted: a per-position
    # rate a with a(1 + a)/2 = 0.5, i.e. about 0.62.
    steps = [_step(4, g, 0.01 * (1 + g), accepted=4 * g // 2) for g in (0, 2) for _ in range(3)]
    steps += [_step(4, 1, 0.015, accepted=2) for _ in range(3)]
    table = StepTable.from_steps(steps)
    assert table.acceptance is not None and 0.55 < table.acceptance < 0.7


def test_bad_tables_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(NightjarInputError, match="every gamma"):
        StepTable.from_steps([_step(1, 0, 0.01)] * 5)  # nospec alone says nothing
    with pytest.raises(NightjarInputError, match="enough steps"):
        StepTable.from_steps([_step(1, 0, 0.01), _step(1, 1, 0.01)])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "nightjar-step-table", "batch_sizes": [2, 1]}))
    with pytest.raises(NightjarInputError, match="malformed"):
        load_latency(str(bad))
    with pytest.raises(NightjarInputError, match="unknown profile"):
        load_latency("no-such-profile")


def test_profile_is_clamped_to_its_table_and_carried_past_its_largest_batch() -> None:
    latency, alpha = load_latency("a100-80gb/vicuna-13b+vicuna-68m")
    assert isinstance(latency, Clamped) and alpha is None
    p = latency.profile
    edge = p.step_time_s(p.max_batch_size, p.gamma_max, p.max_context_len)
    # gamma and context clamp to the table's edge; the batch is priced past it,
    # along the last segment, never cheaper than the largest measured batch.
    big = 10 * p.max_batch_size
    priced = latency.step_time_s(big, 99, 1e9)
    assert priced == p.step_time_s(big, p.gamma_max, p.max_context_len)
    assert priced > edge
    assert latency.step_time_s(p.max_batch_size, 99, 1e9) == edge
    assert latency.off_grid_lookups == 2


def test_context_slope_is_pooled_over_gammas() -> None:
    steps = []
    for g in (0, 1):
        for ctx in (10.0, 50.0, 90.0):
            s = _step(8, g, 0.01 * (1 + g) + 0.001 * ctx)
            s.mean_context_len = ctx
            steps.append(s)
    table = StepTable.from_steps(steps)
    assert table.context_slope_s == pytest.approx((0.001,))
    assert table.step_time_s(8, 1, 200.0) == pytest.approx(0.02 + 0.2)
