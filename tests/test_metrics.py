"""Summary, regret, CSV output and the terminal table on hand-computed runs."""

from __future__ import annotations

import dataclasses
import io
import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from nightjar.core.records import RequestRecord, RunResult, StepRecord
from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError
from nightjar.report.folder import write_all
from nightjar.report.terminal import summary_table
from nightjar.results.metrics import summarize
from nightjar.results.outdir import MARKER
from nightjar.results.regret import Yardsticks, per_token_latency, regret, regret_curve
from nightjar.results.run_set import ResultSet
from nightjar.results.write import (
    policy_slug,
    prepare_out_dir,
    unique_slugs,
    write_run,
    write_summary_csv,
)

NAN = float("nan")


def step(
    t: float,
    dt: float,
    b: int,
    g: int,
    drafted: int = 0,
    acc: int = 0,
    emitted: int = 0,
    used: int = 10,
    total: int = 100,
    prefill: int = 0,
    state: str = "resident",
) -> StepRecord:
    return StepRecord(
        time_s=t,
        step_time_s=dt,
        batch_size=b,
        num_waiting=0,
        gamma=g,
        prefill_tokens=prefill,
        drafted=drafted,
        accepted=acc,
        emitted=emitted,
        kv_used_blocks=used,
        kv_total_blocks=total,
        draft_state=state,
    )


def hand_run(policy: str = "fixed:2", time_scale: float = 1.0) -> RunResult:
    requests = [
        RequestRecord(0, 0.0, 10, 5, first_token_s=1.0, finish_s=3.0),
        RequestRecord(1, 1.0, 10, 1, first_token_s=2.0, finish_s=2.0),
        RequestRecord(2, 2.0, 10, 3, first_token_s=4.0, finish_s=5.0, preemptions=2),
        RequestRecord(3, 3.0, 10, 4),  # never finished
    ]
    k = time_scale
    steps = [
        step(0, 1 * k, 0, 0, prefill=10),  # prefill only: no gamma decision
        step(1, 1 * k, 1, 2, drafted=2, acc=1, emitted=2),
        step(2, 2 * k, 2, 2, drafted=4, acc=2, emitted=4),
        step(4, 1 * k, 2, 0, emitted=2),
        step(5, 1 * k, 1, 3, drafted=3, acc=3, emitted=4, used=50, total=80, state="offloaded"),
        step(6, 1 * k, 1, 3, drafted=3, acc=0, emitted=1, used=40, total=80),
    ]
    return RunResult(
        policy, "sim", "hand", "toy", 0, 10.0, requests, steps, extra={"offloads": 1.0}
    )


def test_summary_by_hand() -> None:
    s = summarize(hand_run(), Slo(ttft_s=1.5, tpot_s=0.6))
    assert (s.requests_total, s.requests_finished) == (4, 3)
    assert s.output_tokens == 9 and s.throughput_tok_s == pytest.approx(0.9)
    assert s.throughput_req_s == pytest.approx(0.3)
    assert s.ttft_s.mean == pytest.approx(4 / 3) and s.ttft_s.p50 == pytest.approx(1.0)
    assert s.tpot_s.mean == pytest.approx(0.5)  # 1-token request skipped
    assert s.e2e_s.mean == pytest.approx(7 / 3) and s.e2e_s.p50 == pytest.approx(3.0)
    assert s.e2e_s.p99 == pytest.approx(3.0)
    assert s.goodput_req_s == pytest.approx(0.2)  # request 2 misses TTFT
    assert s.preemptions == 2
    assert s.acceptance == pytest.approx(6 / 12)
    assert s.mean_gamma == pytest.approx(2.0)
    assert s.mean_gamma_per_request == pytest.approx(12 / 7)
    assert s.gamma_switches == 2  # 2 -> 0 -> 3; the prefill-only step is ignored
    assert s.switches_per_min == pytest.approx(12.0)
    assert s.toggles_per_min == pytest.approx(12.0)
    assert s.spec_time_share == pytest.approx(5 / 6)
    assert s.mean_batch_size == pytest.approx(9 / 6)
    assert s.peak_kv_used_blocks == 50 and s.peak_kv_usage == pytest.approx(0.625)
    d = s.as_dict()
    assert d["ttft_s_p99"] == s.ttft_s.p99 and d["slo_tpot_s"] == 0.6 and d["offloads"] == 1.0


def test_summary_of_empty_run_is_nan_not_error(tmp_path: Path) -> None:
    empty = RunResult("nospec", "sim", "t", "p", 0, 0.0)
    s = summarize(empty)
    assert s.requests_total == 0 and math.isnan(s.ttft_s.mean) and math.isnan(s.acceptance)
    # JSON has no NaN: undefined statistics are written as null.
    run = ResultSet.build([empty]).runs[0]
    record = json.loads(write_run(run, prepare_out_dir(tmp_path / "o"))[2].read_text())
    assert record["ttft_s_mean"] is None and record["requests_total"] == 0


def test_regret_zero_against_itself_positive_against_better_oracle() -> None:
    run = hand_run()
    assert per_token_latency(run) == pytest.approx(9 / 13)
    same = regret(run, run)
    assert same.percent == 0.0 and same.absolute_s == 0.0
    better = regret(run, hand_run("oracle", time_scale=0.5))
    assert better.percent == pytest.approx(100.0)
    assert better.absolute_s == pytest.approx(4.5)  # (9/13 - 4.5/13) * 13 tokens
    other_trace = dataclasses.replace(hand_run("oracle"), trace="other")
    with pytest.raises(NightjarInputError, match="same trace"):
        regret(run, other_trace)


def _learner(n: int, slow: int) -> RunResult:
    """One request decoding; the first ``slow`` steps take twice the oracle's time."""
    steps, t = [], 0.0
    for i in range(n):
        dt = 2.0 if i < slow else 1.0
        steps.append(step(t, dt, 1, 1, emitted=1))
        t += dt
    return RunResult("learner" if slow else "oracle", "sim", "tr", "p", 0, t, [], steps)


def test_regret_curve_shrinks_as_trace_grows() -> None:
    curve = regret_curve(_learner(200, 20), _learner(200, 0), points=10)
    assert list(curve.columns) == ["time_s", "ptl_s", "oracle_ptl_s", "regret_pct"]
    assert len(curve) == 10 and curve["time_s"].is_monotonic_increasing
    pct = curve["regret_pct"].to_numpy()
    # Every step is slow until t=40, then the gap is diluted by fast steps.
    assert pct[:2] == pytest.approx([100.0, 100.0])
    assert all(pct[2:] < pct[1:-1]) and pct[-1] == pytest.approx(200 / 180 * 100 - 100)


def test_slugs_readable_and_unique() -> None:
    assert policy_slug("fixed:3") == "fixed-3"
    assert policy_slug("nightjar") == "nightjar"
    sched = policy_slug("schedule:1-16:3,17-64:1,65-:0")
    assert sched == "schedule-1-16=3_17-64=1_65-=0"
    weird = ["a b", "a/b", "a_b", "a:b=c", "a:b:c", ".."]
    slugs = [policy_slug(s) for s in weird]
    assert len(set(slugs)) == len(slugs)
    assert all("/" not in s and " " not in s and s.strip(".") for s in slugs)
    runs = [hand_run("fixed:3"), dataclasses.replace(hand_run("fixed:3"), engine="live")]
    assert unique_slugs(runs) == ["fixed-3", "fixed-3-live"]


def test_write_run_and_comparison_columns(tmp_path: Path) -> None:
    out = prepare_out_dir(tmp_path / "out")
    run, oracle = hand_run(), hand_run("oracle", time_scale=0.5)
    results = ResultSet.build([run, oracle])
    paths = write_run(results.runs[0], out)
    assert [p.relative_to(out).as_posix() for p in paths] == [
        "fixed-2/requests.csv",
        "fixed-2/steps.csv",
        "fixed-2/summary.json",
    ]
    req = pd.read_csv(paths[0])
    assert {"request_id", "arrival_s", "finish_s", "ttft_s", "tpot_s", "e2e_s"} <= set(req)
    assert len(req) == 4
    steps = pd.read_csv(paths[1])
    assert {"time_s", "batch_size", "gamma", "draft_state", "kv_total_blocks"} <= set(steps)
    summary = json.loads(paths[2].read_text())
    assert summary["step_oracle_pct"] == pytest.approx(100.0) and summary["policy"] == "fixed:2"
    # A hand-made run has no bound (only the simulator computes one); fixed:2 is the
    # only static run, so it is its own static yardstick.
    assert summary["regret_bound_pct"] is None  # NaN is written as null
    assert summary["static_yardstick"] == "fixed:2" and summary["gain_static_pct"] == 0.0
    table = pd.read_csv(write_summary_csv(results, out))
    assert list(table["slug"]) == ["fixed-2", "oracle"]
    assert {"throughput_tok_s", "e2e_s_p99", "switches_per_min", "step_oracle_pct",
            "regret_bound_pct", "gain_static_pct", "static_yardstick"} <= set(table)


def test_out_dir_refusal_and_reuse(tmp_path: Path) -> None:
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep me")
    with pytest.raises(NightjarInputError, match="already holds files"):
        prepare_out_dir(user)
    assert (user / "notes.txt").read_text() == "keep me"
    prepare_out_dir(user, force=True)
    assert (user / MARKER).exists()
    ours = tmp_path / "ours"
    one = ResultSet.build([hand_run()])
    write_all(one, ours)
    with pytest.raises(NightjarInputError, match="earlier nightjar run"):
        write_all(one, ours)  # not even our own earlier run, unless asked
    write_all(one, ours, force=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(NightjarInputError, match="not a directory"):
        prepare_out_dir(tmp_path / "file")
    with pytest.raises(NightjarInputError, match="cannot write to"):
        prepare_out_dir(tmp_path / "file" / "sub")  # parent is a file: mkdir fails


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores directory permissions")
def test_unwritable_out_dir(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(NightjarInputError, match="cannot write to"):
        prepare_out_dir(locked / "sub")


def test_summary_table_fits_120_columns_and_narrows_legibly() -> None:
    runs = [hand_run("schedule:1-16:3,17-64:1,65-:0"), hand_run("nightjar")]
    yards = {r.policy: Yardsticks(r.policy, 0.1, 100.0, "fixed:1", -5.0) for r in runs}
    table = summary_table([summarize(r) for r in runs], yards)
    texts = {}
    for width in (120, 80):
        console = Console(file=io.StringIO(), width=width, color_system=None)
        console.print(table)
        texts[width] = console.file.getvalue()  # type: ignore[attr-defined]
        assert max(len(line) for line in texts[width].splitlines()) <= width
        assert "…" not in texts[width] and "nightjar" in texts[width]
    assert "mean/p99" in texts[120] and "1.33/1.98" in texts[120] and "3/4" in texts[120]
    # offloads, regret and gain columns, and the caption naming the yardsticks
    assert "loads" in texts[120] and "100" in texts[120] and "-5.00" in texts[120]
    assert "bound" in texts[120] and "fixed:1" in texts[120]
    assert "mean/p99" not in texts[80] and "1.33" in texts[80]
    assert "loads" in texts[80] and "100" in texts[80]  # no column cropped at 80


def test_short_policy_names_do_not_fold_at_80_columns() -> None:
    runs = [hand_run(p) for p in ("nospec", "nightjar-code", "nightjar+")]
    yards = {r.policy: Yardsticks(r.policy, 0.1, 1.0, "nospec", 2.0) for r in runs}
    console = Console(file=io.StringIO(), width=80, color_system=None)
    console.print(summary_table([summarize(r) for r in runs], yards))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "nightjar-code" in text and "nightjar+" in text and "loads" in text


def test_latency_percentiles_are_vllm_benchs_and_slo_ones() -> None:
    import numpy as np

    from nightjar.results.metrics import Stat

    stat = Stat.of(np.arange(1.0, 101.0))  # 1..100 s
    assert (stat.mean, stat.p50, stat.p90, stat.p95, stat.p99) == pytest.approx(
        (50.5, 50.5, 90.1, 95.05, 99.01))
    assert all(math.isnan(v) for v in dataclasses.astuple(Stat.of(np.array([]))))
    flat = summarize(hand_run()).as_dict()
    assert {f"{k}_s_{p}" for k in ("ttft", "tpot", "e2e") for p in ("p90", "p95")} <= set(flat)
