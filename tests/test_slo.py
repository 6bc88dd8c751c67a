"""SLO thresholds: flags on sim/live/sweep, attainment in the summary, table and report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.cli import build_parser, main
from nightjar.core.records import RequestRecord, RunResult
from nightjar.core.slo import Slo
from nightjar.results.metrics import summarize


def run_of(ttfts: list[float], tpots: list[float], unfinished: int = 0) -> RunResult:
    requests = []
    for i, (ttft, tpot) in enumerate(zip(ttfts, tpots, strict=True)):
        first = i + ttft
        requests.append(RequestRecord(i, float(i), 10, 11, first_token_s=first,
                                      finish_s=first + 10 * tpot))
    for j in range(unfinished):
        requests.append(RequestRecord(len(ttfts) + j, 0.0, 10, 5))
    return RunResult("nospec", "sim", "t", "p", 0, 10.0, requests, [])


def test_attainment_counts_every_request_and_the_limits_travel() -> None:
    run = run_of([0.5, 1.5, 3.0, 0.2], [0.05, 0.05, 0.05, 0.2], unfinished=1)
    default = summarize(run)
    assert default.goodput_req_s == pytest.approx(2 / 10)  # 3.0 s TTFT, 200 ms TPOT miss
    assert default.slo_attainment == pytest.approx(2 / 5)  # the unfinished one misses too
    loose = summarize(run, Slo(ttft_s=5.0, tpot_s=0.25))
    assert loose.slo_attainment == pytest.approx(4 / 5)
    flat = loose.as_dict()
    assert flat["slo_ttft_s"] == 5.0 and flat["slo_tpot_s"] == 0.25
    assert Slo(1.0, 0.05).describe() == "SLO: TTFT <= 1 s, TPOT <= 50 ms"
    with pytest.raises(ValueError):
        Slo(0.0, 0.1)


def test_sim_flags_change_goodput_and_print_the_thresholds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = {}
    for ttft in ("2", "0.05"):
        out = tmp_path / ttft
        code = main(["sim", "--trace", "steady_low", "--policy", "fixed:3", "--no-oracle",
                     "--slo-ttft", ttft, "--slo-tpot", "0.08", "--out", str(out), "--quiet"])
        assert code == 0
        text = capsys.readouterr().out
        assert f"SLO: TTFT <= {float(ttft):g} s, TPOT <= 80 ms" in text
        rows[ttft] = json.loads((out / "fixed-3" / "summary.json").read_text())
        html = (out / "report.html").read_text()
        assert "SLO<br>%" in html and f"TTFT ≤ {float(ttft):g} s" in html
    assert rows["2"]["slo_ttft_s"] == 2.0 and rows["0.05"]["slo_tpot_s"] == 0.08
    assert rows["0.05"]["slo_attainment"] < rows["2"]["slo_attainment"]
    assert rows["0.05"]["goodput_req_s"] < rows["2"]["goodput_req_s"]


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_bad_slo_is_one_line_exit_2(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["sim", "--trace", "steady_low", "--slo-tpot", value, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--slo-tpot" in err and err.count("\n") == 1


def test_live_and_sweep_take_the_flags() -> None:
    parser = build_parser()
    live = parser.parse_args(["live", "--model", "m", "--slo-ttft", "0.7", "--slo-tpot", "0.03"])
    assert (live.slo_ttft, live.slo_tpot) == (0.7, 0.03)
    sweep = parser.parse_args(["sweep", "--slo-ttft", "0.7"])
    assert sweep.slo_ttft == 0.7 and sweep.slo_tpot is None  # None: the TOML file decides
