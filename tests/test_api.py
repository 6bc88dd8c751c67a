"""The Python API: in-memory traces, simulate, results_frame, load_run, lazy import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nightjar
from nightjar import Trace
from nightjar.errors import NightjarInputError
from nightjar.report.folder import write_all
from nightjar.trace.schema import parse_trace_json
from nightjar.trace.trace import materialize


def test_import_nightjar_is_cheap() -> None:
    code = ("import sys, nightjar; heavy = {'pandas', 'simpy', 'plotly', 'ray'} & set(sys.modules);"
            " assert not heavy, heavy; nightjar.simulate")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_from_segments_equals_the_same_trace_from_json() -> None:
    made = Trace.from_segments([(4, 10), {"rate_rps": 12, "duration_s": 5, "burstiness": 0.5}],
                               workload="alpaca", seed=9, name="x")
    doc = {"name": "x", "seed": 9, "workload": "alpaca", "segments": [
        {"rate_rps": 4, "duration_s": 10}, {"rate_rps": 12, "duration_s": 5, "burstiness": 0.5}]}
    ref = materialize(parse_trace_json(doc, "ref", "x"))
    np.testing.assert_array_equal(made.arrival_s, ref.arrival_s)
    np.testing.assert_array_equal(made.output_tokens, ref.output_tokens)
    assert made.duration_s == 15.0


def test_from_requests_takes_dicts_or_a_frame() -> None:
    rows = [{"arrival_s": 1.0, "prompt_tokens": 5, "output_tokens": 3, "acceptance": 0.5},
            {"arrival_s": 0.0, "prompt_tokens": 7, "output_tokens": 2}]
    a = Trace.from_requests(rows, name="r")
    b = Trace.from_requests(pd.DataFrame(rows), name="r")  # NaN acceptance = not given
    for t in (a, b):
        assert t.arrival_s.tolist() == [0.0, 1.0] and t.prompt_tokens.tolist() == [7, 5]
        assert np.isnan(t.acceptance[0]) and t.acceptance[1] == 0.5


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Trace.from_segments([(4,)]), "expected (rate_rps, duration_s"),
        (lambda: Trace.from_segments([(-1, 10)]), "rate_rps must be >= 0"),
        (lambda: Trace.from_segments([]), "empty trace"),
        (lambda: Trace.from_requests([{"arrival_s": 0, "prompt_tokens": 3}]),
         "missing field 'output_tokens'"),
        (lambda: nightjar.simulate("steady_low", policies="nospec", reload="teleport"),
         "teleport"),
        (lambda: nightjar.simulate("steady_low", policies="warp"), "unknown policy 'warp'"),
        (lambda: nightjar.simulate("steady_low", policies="nospec", gamma_max=99),
         "gamma_max 99 exceeds the profile's table"),
    ],
)
def test_bad_input_raises_one_line_errors(call: object, message: str) -> None:
    with pytest.raises(NightjarInputError, match=None) as info:
        call()
    assert message in str(info.value) and "\n" not in str(info.value)


def test_simulate_matches_the_engine_and_frames_every_run() -> None:
    res = nightjar.simulate("steady_low", policies=["nospec", "fixed:2"], oracle=True)
    assert [r.policy for r in res] == ["nospec", "fixed:2", "oracle"]
    assert res["fixed:2"] is res[1]
    frame = nightjar.results_frame(res)
    assert {"step_oracle_pct", "regret_bound_pct", "gain_static_pct", "slo_attainment",
            "goodput_req_s"} <= set(frame.columns)
    plain = nightjar.results_frame(list(res.runs))  # a plain list of runs works too
    assert plain["throughput_tok_s"].tolist() == frame["throughput_tok_s"].tolist()
    assert type(res.figure()).__name__ == "Figure"
    assert all(type(f).__name__ == "Figure" for f in res.comparison_figures())


def test_load_run_reads_sim_and_live_folders_back(tmp_path: Path) -> None:
    res = nightjar.simulate("steady_low", policies=["nospec", "fixed:3"], slo_ttft=0.5,
                            oracle=False)
    for r in res.runs:
        r.engine = "live"  # a live run's folder has the same layout
    out = tmp_path / "live"
    write_all(res.result_set(), out)
    back = nightjar.load_run(out)
    assert [r.engine for r in back] == ["live", "live"] and back.slo == res.slo
    want = nightjar.results_frame(res)
    got = nightjar.results_frame(back)
    pd.testing.assert_frame_equal(got, want)
    single = nightjar.load_run(out / "fixed-3")
    assert [r.policy for r in single] == ["fixed:3"]


def test_load_run_refuses_what_is_not_a_run(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(NightjarInputError, match="not a nightjar run folder"):
        nightjar.load_run(empty)
    (empty / "sweep.json").write_text("{}")
    with pytest.raises(NightjarInputError, match=r"results\.csv: cannot read"):
        nightjar.load_run(empty)


def test_parquet_run_folders_read_back_like_csv(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from nightjar.cli import main

    for fmt in ("csv", "parquet"):
        assert main(["sim", "--trace", "steady_low", "--policy", "nospec", "--policy",
                     "fixed:3", "--format", fmt, "--out", str(tmp_path / fmt), "--quiet",
                     "--no-report"]) == 0
    assert (tmp_path / "parquet" / "fixed-3" / "steps.parquet").is_file()
    assert not (tmp_path / "parquet" / "fixed-3" / "steps.csv").exists()
    frames = [nightjar.results_frame(nightjar.load_run(tmp_path / f)) for f in ("csv", "parquet")]
    # The same runs but for their wall time and the command that wrote them.
    cols = [c for c in frames[0].columns if c not in ("wall_s", "command")]
    pd.testing.assert_frame_equal(frames[0][cols], frames[1][cols])
    assert (frames[1]["command"].str.contains("--format parquet")).all()
