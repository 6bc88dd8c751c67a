"""Frames a notebook user wants: long per-request and per-step frames naming their run,
counts as ints, one ``load_run`` for every kind of output folder, parquet everywhere,
and output folders others on the machine can read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nightjar
from nightjar.cli import main
from nightjar.errors import NightjarInputError

POLICIES = ["nospec", "fixed:2", "nightjar+"]


@pytest.fixture(scope="module")
def results() -> nightjar.Results:
    trace = nightjar.Trace.from_segments([(4, 10), (20, 10, 0.5)], workload="alpaca", seed=3)
    return nightjar.simulate(trace, policies=POLICIES)


def test_the_request_frame_has_latencies_and_names_its_run(results: nightjar.Results) -> None:
    frame = nightjar.results_frame(results, per="request")
    assert list(frame.columns[:5]) == ["policy", "engine", "trace", "profile", "seed"]
    for col in ("ttft_s", "tpot_s", "e2e_s"):
        assert frame[col].dtype == np.float64
    assert set(frame["policy"]) == {*POLICIES, "oracle"}
    for col in ("seed", "request_id", "prompt_tokens", "output_tokens", "preemptions"):
        assert frame[col].dtype == np.int64, col
    one = results["fixed:2"]
    mine = frame[frame["policy"] == "fixed:2"]
    assert len(mine) == len(one.requests)
    finished = mine.dropna(subset=["finish_s"])
    np.testing.assert_allclose(finished["e2e_s"], finished["finish_s"] - finished["arrival_s"])
    # The run's own frame has them too, so a single run needs no helper either.
    assert {"ttft_s", "tpot_s", "e2e_s"} <= set(one.requests_frame().columns)


def test_plotly_express_draws_it_without_glue(results: nightjar.Results) -> None:
    px = pytest.importorskip("plotly.express")
    fig = px.ecdf(nightjar.results_frame(results, per="request"), x="tpot_s", color="policy")
    assert sorted(t.name for t in fig.data) == sorted([*POLICIES, "oracle"])
    assert all(len(t.x) > 0 for t in fig.data)


def test_the_step_frame_and_bad_per(results: nightjar.Results) -> None:
    steps = results.frame(per="step")
    assert steps["gamma"].dtype == np.int64 and set(steps["policy"]) == {*POLICIES, "oracle"}
    assert len(steps) == sum(len(r.steps) for r in results)
    with pytest.raises(NightjarInputError, match="per must be one of run, request, step"):
        nightjar.results_frame(results, per="token")


def test_counts_are_ints_in_the_run_frame(results: nightjar.Results) -> None:
    frame = nightjar.results_frame(results)
    for col in ("preemptions", "gamma_switches", "gamma_toggles", "offloads",
                "rejected_requests", "requests_finished"):
        assert frame[col].dtype == np.int64, col
    assert frame["wall_s"].dtype == np.float64  # seconds stay float
    # A toggle is a switch that turns speculation on or off.
    assert (frame["gamma_toggles"] <= frame["gamma_switches"]).all()
    nospec = frame[frame["policy"] == "nospec"].iloc[0]
    assert nospec["gamma_switches"] == nospec["gamma_toggles"] == 0


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_load_run_reads_a_multi_seed_run(tmp_path: Path, fmt: str) -> None:
    if fmt == "parquet":
        pytest.importorskip("pyarrow")
    out = tmp_path / "run"
    assert main(["sim", "--trace", "steady_low", "--policy", "nospec", "--policy", "fixed:2",
                 "--seeds", "3", "--format", fmt, "--out", str(out), "--quiet",
                 "--no-report"]) == 0
    other = "csv" if fmt == "parquet" else "parquet"
    for stem in ("seeds", "intervals"):
        assert (out / f"{stem}.{fmt}").is_file() and not (out / f"{stem}.{other}").exists()
    back = nightjar.load_run(out)
    assert [(r.seed, r.policy) for r in back] == [
        (s, p) for s in range(3) for p in ("nospec", "fixed:2", "oracle")
    ]
    frame = nightjar.results_frame(back)
    assert sorted(set(frame["seed"])) == [0, 1, 2]
    # The seeds file holds what the runs read back say, seed by seed.
    seeds = pd.read_parquet(out / "seeds.parquet") if fmt == "parquet" else pd.read_csv(
        out / "seeds.csv")
    assert seeds["preemptions"].dtype == np.int64
    for row in seeds.itertuples():
        mine = frame[(frame["seed"] == row.seed) & (frame["policy"] == row.policy)].iloc[0]
        assert mine["throughput_tok_s"] == pytest.approx(row.throughput_tok_s, rel=1e-12)
    regret = frame[frame["policy"] != "oracle"]["regret_pct"]
    assert regret.notna().all()  # each seed's oracle is found in its own seed folder
    requests = nightjar.results_frame(back, per="request")
    assert sorted(set(requests["seed"])) == [0, 1, 2]


def test_load_run_reads_a_sweep_as_its_table(tmp_path: Path) -> None:
    table = nightjar.run_sweep(tmp_path / "sw", trace="steady_low", policy=["nospec"],
                               seeds=2, report=False)
    back = nightjar.load_run(tmp_path / "sw")
    assert back.table is not None and len(back) == 0
    got = nightjar.results_frame(back)
    assert list(got["seed"]) == list(table["seed"]) == [0, 1]
    with pytest.raises(NightjarInputError, match="one summary row per cell"):
        nightjar.results_frame(back, per="request")


def test_run_folders_are_readable_by_others(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        out = tmp_path / "run"
        assert main(["sim", "--trace", "steady_low", "--policy", "nospec", "--no-oracle",
                     "--out", str(out), "--quiet", "--no-report"]) == 0
        sweep = tmp_path / "sweep"
        nightjar.run_sweep(sweep, trace="steady_low", policy=["nospec"], report=False)
    finally:
        os.umask(old)
    for path in (out, out / "nospec", sweep, sweep / "cells"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o755, path
    for path in (out / "summary.csv", out / "nospec" / "requests.csv", sweep / "results.csv"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644, path
