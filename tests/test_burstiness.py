"""``--burstiness``: a trace's requests at arrival times drawn as `vllm bench serve
--burstiness` draws them (gamma gaps of shape B at the trace's mean rate)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from nightjar.cli import main
from nightjar.errors import NightjarInputError
from nightjar.trace.trace import load_trace


def test_gaps_keep_the_mean_rate_and_take_the_shape_asked() -> None:
    trace = load_trace("steady_high")
    n = len(trace)
    for shape in (0.25, 1.0, 4.0):
        drawn = trace.gamma_arrivals(shape, seed=7)
        gaps = np.diff(drawn.arrival_s)
        assert drawn.arrival_s[0] == 0.0 and (gaps >= 0).all()
        assert gaps.mean() == pytest.approx(trace.duration_s / n, rel=0.1)
        # A gamma of shape k has a coefficient of variation of 1 / sqrt(k).
        assert gaps.std() / gaps.mean() == pytest.approx(1 / np.sqrt(shape), rel=0.15)
        assert (drawn.prompt_tokens == trace.prompt_tokens).all()  # same requests, in order
    again = trace.gamma_arrivals(1.0, seed=7).arrival_s
    assert (again == trace.gamma_arrivals(1.0, seed=7).arrival_s).all()
    assert not (again == trace.gamma_arrivals(1.0, seed=8).arrival_s).all()


def test_one_request_has_no_rate_to_keep() -> None:
    with pytest.raises(NightjarInputError, match="--burstiness"):
        load_trace("steady_low").head(1).gamma_arrivals(1.0, seed=0)


def test_sim_records_the_burstiness_and_refuses_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["sim", "--trace", "steady_low", "--request-rate", "2", "--policy", "nospec",
            "--no-oracle", "--quiet", "--no-report"]
    assert main([*base, "--burstiness", "0.5", "--out", str(tmp_path / "a")]) == 0
    assert main([*base, "--out", str(tmp_path / "b")]) == 0
    a = next(csv.DictReader((tmp_path / "a" / "summary.csv").open()))
    b = next(csv.DictReader((tmp_path / "b" / "summary.csv").open()))
    assert a["burstiness"] == "0.5" and b["burstiness"] == ""
    assert a["e2e_s_mean"] != b["e2e_s_mean"]  # other arrival times
    for bad in ("0", "-1", "nan", "inf"):
        capsys.readouterr()
        assert main([*base, "--burstiness", bad, "--out", str(tmp_path / f"bad{bad}")]) == 2
        assert "--burstiness" in capsys.readouterr().err
