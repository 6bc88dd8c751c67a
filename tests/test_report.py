"""The HTML report: self-contained, names every policy, stays small when runs are long."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nightjar.errors import NightjarInputError
from nightjar.output import write_all
from nightjar.records import RequestRecord, RunResult, StepRecord
from nightjar.report import write_report
from nightjar.report_charts import MAX_POINTS, downsample_steps


def synthetic_run(
    policy: str, n_steps: int, n_requests: int, seed: int, slow: float = 1.0
) -> RunResult:
    """A plausible-looking run; ``slow`` scales every step time (oracle: < 1 is better)."""
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0, 100, n_requests))
    out = rng.integers(1, 200, n_requests)
    ttft = rng.exponential(0.5, n_requests)
    requests = [
        RequestRecord(
            i,
            float(a),
            100,
            int(o),
            first_token_s=float(a + f),
            finish_s=float(a + f + 0.02 * (o - 1)),
        )
        for i, (a, o, f) in enumerate(zip(arrivals, out, ttft, strict=True))
    ]
    batch = rng.integers(1, 64, n_steps)
    gamma = rng.integers(0, 5, n_steps)
    dt = 0.01 + 0.0005 * batch * (1 + gamma) * slow
    times = np.concatenate([[0.0], np.cumsum(dt)[:-1]])
    states = np.where(rng.random(n_steps) < 0.8, "resident", "offloaded")
    steps = [
        StepRecord(
            float(t),
            float(d),
            int(b),
            int(b // 4),
            int(g),
            0,
            int(b * g),
            int(b * g // 2),
            int(b + b * g // 2),
            int(b * 10),
            4000,
            str(s),
        )
        for t, d, b, g, s in zip(times, dt, batch, gamma, states, strict=True)
    ]
    return RunResult(
        policy,
        "sim",
        "synthetic",
        "toy",
        seed,
        float(times[-1] + dt[-1]),
        requests,
        steps,
        extra={"offloads": 3.0},
    )


def test_downsample_keeps_bound_and_means() -> None:
    frame = synthetic_run("x", 3 * MAX_POINTS, 10, 0).steps_frame()
    small = downsample_steps(frame)
    assert len(small) == MAX_POINTS
    assert small["time_s"].is_monotonic_increasing
    # Equal-count buckets keep the overall mean of gamma exactly when n divides evenly.
    assert small["gamma"].mean() == pytest.approx(frame["gamma"].mean())
    assert small["resident"].between(0, 1).all()
    short = frame.head(10)
    assert len(downsample_steps(short)) == 10


def test_report_self_contained_names_policies_and_small(tmp_path: Path) -> None:
    specs = [
        "nospec",
        "fixed:3",
        "schedule:1-16:3,17-64:1,65-:0",
        "nightjar",
        "dsd",
        "banditspec",
        "tetris",
        "sglang",
        "fixed:1",
    ]
    runs = [synthetic_run(s, 20_000, 2000, i) for i, s in enumerate(specs)]
    oracle = synthetic_run("oracle", 20_000, 2000, 99, slow=0.5)
    path = write_report([*runs, oracle], tmp_path / "r" / "report.html", "A <test>", oracle=oracle)
    text = path.read_text(encoding="utf-8")
    assert text.count("<script") >= 2 and "plotly" in text.lower()
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, re.IGNORECASE)
    for spec in [*specs, "oracle"]:
        assert spec in text
    assert "A &lt;test&gt;" in text  # the title is escaped
    assert "cumulative regret vs oracle" in text and "Regret % = per-token" in text
    size = path.stat().st_size
    # plotly.js itself is ~4.8 MB; ten long runs add well under 2 MB more.
    assert size < 6.8e6, size


def test_report_without_oracle_and_empty_input(tmp_path: Path) -> None:
    run = synthetic_run("fixed:2", 300, 50, 1)
    text = write_report([run], tmp_path / "one.html", "one").read_text()
    assert "fixed:2" in text and "regret" not in text.lower()
    with pytest.raises(NightjarInputError):
        write_report([], tmp_path / "none.html", "none")


def test_downsample_accepts_engine_state_spelling() -> None:
    frame = pd.DataFrame(
        {
            "time_s": [0.0, 1.0],
            "batch_size": [1, 1],
            "num_waiting": [0, 0],
            "gamma": [1, 0],
            "kv_used_blocks": [1, 1],
            "kv_total_blocks": [9, 9],
            "draft_state": ["RESIDENT", "offloaded"],
        }
    )
    assert list(downsample_steps(frame)["resident"]) == [1.0, 0.0]


def test_write_all_adds_report(tmp_path: Path) -> None:
    run = synthetic_run("nightjar", 200, 20, 2)
    paths = write_all([run], tmp_path / "out", report_title="demo")
    assert paths[-1] == tmp_path / "out" / "report.html"
    assert "nightjar" in paths[-1].read_text()
