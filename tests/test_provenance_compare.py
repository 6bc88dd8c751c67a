"""A run that says what it was (provenance columns), ``nightjar compare`` and paired
statistics in ``sim --seeds`` and sweeps, ``--request-rate`` (issue 39)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

import nightjar
from nightjar.cli import main
from nightjar.results.comparison import RunSet, compare_rows, setting_changes
from nightjar.results.provenance import KEYS, trace_hash
from nightjar.sweep.baseline import paired_frame
from nightjar.trace.trace import load_trace

RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"


def _sim(out: Path, *extra: str) -> int:
    return main(["sim", "--trace", "steady_low", "--profile", RTX, "--policy", "nospec",
                 "--policy", "nightjar+", "--no-oracle", "--no-report", "--quiet",
                 "--out", str(out), *extra])


def test_a_run_folder_records_its_settings_and_compare_pairs_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    on, off = tmp_path / "on", tmp_path / "off"
    assert _sim(on, "--rate-scale", "2", "--offload", "on") == 0
    assert _sim(off, "--rate-scale", "2", "--offload", "off") == 0
    rows = list(csv.DictReader((on / "summary.csv").open()))
    assert [r["policy"] for r in rows] == ["nospec", "nightjar+"]
    for row in rows:
        assert row["rate_scale"] == "2.0" and row["offload"] == "on"
        assert row["gamma_max"] == "4" and row["nightjar_version"] == nightjar.__version__
        assert row["command"].startswith("nightjar sim --trace steady_low")
        assert "--offload on" in row["command"]
        assert row["trace_sha256"] == trace_hash(load_trace("steady_low").rate_scaled(2.0))
        assert row["acceptance_source"] == "profile (assumed): sharegpt"
        assert row["max_model_len"] == "131072"  # the window it ran under: the model's
    summary = json.loads((on / "nightjar+" / "summary.json").read_text())
    assert summary["offload"] == "on" and summary["rate_scale"] == 2.0
    assert summary["scheduling"] == "v1" and summary["draft_kv"] == "skip"
    # Read back: the settings are the run's provenance, not engine extras.
    back = nightjar.load_run(on)
    assert back["nightjar+"].provenance["offload"] == "on"
    assert not set(back["nightjar+"].extra) & KEYS
    capsys.readouterr()
    assert main(["compare", str(on), str(off)]) == 0
    text = capsys.readouterr().out
    assert "off against on: offload on -> off" in text
    assert "one shared seed" in text and "nightjar+" in text and "tok/s" in text


def test_compare_pairs_seeds_and_claims_only_separated_differences() -> None:
    trace = load_trace("steady_low")
    on = [r for seed in (0, 1, 2) for r in nightjar.simulate(
        trace, RTX, ["nightjar+"], seed=seed, oracle=False, offload="on")]
    same = [r for seed in (0, 1, 2) for r in nightjar.simulate(
        trace, RTX, ["nightjar+"], seed=seed, oracle=False, offload="on")]
    fixed = [r for seed in (0, 1, 2) for r in nightjar.simulate(
        trace, RTX, ["fixed:4"], seed=seed, oracle=False, offload="on")]
    for r in fixed:
        r.policy = "nightjar+"  # the same name, another behaviour: a real difference
    rows = compare_rows([RunSet("a", on), RunSet("b", same), RunSet("c", fixed)])
    b = [r for r in rows if r["other"] == "b"]
    assert {r["seeds"] for r in b} == {3}
    assert all(r["diff"] == 0.0 and r["verdict"] == "no claim" for r in b)  # deterministic
    c = {r["metric"]: r for r in rows if r["other"] == "c"}
    tpot = c["tpot_s_mean"]
    assert tpot["diff_lo"] <= tpot["diff"] <= tpot["diff_hi"]
    assert tpot["verdict"] in ("a better", "c better")  # fixed:4 is not nightjar+
    assert setting_changes([RunSet("a", on), RunSet("b", same)]) == [
        "b against a: the same recorded settings"]


def test_compare_refuses_what_it_cannot_pair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run"
    assert _sim(run) == 0
    capsys.readouterr()
    assert main(["compare", str(run)]) == 2
    assert main(["compare", str(run), str(run)]) == 2
    assert main(["compare", str(run), str(tmp_path / "missing")]) == 2
    other = tmp_path / "other"
    assert main(["sim", "--trace", "steady_low", "--profile", RTX, "--policy", "fixed:1",
                 "--no-oracle", "--no-report", "--quiet", "--out", str(other)]) == 0
    capsys.readouterr()
    assert main(["compare", str(run), str(other)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "shares no policy" in err[0]


def test_sim_seeds_pair_verdicts_and_count_every_seed_requests(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "s"
    assert main(["sim", "--trace", "alpaca-burst", "--profile", RTX, "--seeds", "2",
                 "--policy", "nospec", "--policy", "nightjar+", "--no-oracle", "--no-report",
                 "--quiet", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    counts = [len(load_trace("alpaca-burst", seed=load_trace("alpaca-burst").seed + i))
              for i in (0, 1)]
    assert f"({min(counts)}-{max(counts)} requests" in " ".join(text.split())
    assert "paired per seed" in text
    seeds = pd.read_csv(out / "seeds.csv")
    assert set(seeds["offload"]) == {"on"} and "command" in seeds.columns


def test_a_two_seed_sweep_pairs_its_series_per_seed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: nightjar+ against nospec on alpaca-burst, two seeds. Unpaired,
    the TPOT intervals overlap; paired, the difference is separated."""
    out = tmp_path / "sweep"
    assert main(["sweep", "--trace", "alpaca-burst", "--seeds", "2", "--policy", "nospec",
                 "--policy", "nightjar+", "--out", str(out), "--quiet", "--jobs", "1"]) == 0
    text = capsys.readouterr().out
    assert "series - nospec, paired per seed" in text
    frame = pd.read_csv(out / "results.csv")
    tpot = paired_frame(frame).set_index("metric").loc["tpot_s_mean"]
    assert tpot["series"] == "nightjar+" and tpot["n"] == 2
    assert bool(tpot["separated"]) and tpot["diff"] < 0
    assert "Against nospec, paired per seed" in (out / "report.html").read_text()


def test_request_rate_scales_the_trace_to_that_mean_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "r"
    assert main(["sim", "--trace", "steady", "--request-rate", "12", "--policy", "nospec",
                 "--no-oracle", "--no-report", "--quiet", "--out", str(out)]) == 0
    assert "12 req/s" in " ".join(capsys.readouterr().out.split())
    scale = float(next(csv.DictReader((out / "summary.csv").open()))["rate_scale"])
    trace = load_trace("steady").rate_scaled(scale)
    assert len(trace) / trace.duration_s == pytest.approx(12.0)
    for bad, message in ((["--request-rate", "12", "--rate-scale", "2"], "not both"),
                         (["--request-rate", "0"], "must be a finite number"),
                         (["--request-rate", "nan"], "must be a finite number")):
        assert main(["sim", "--trace", "steady", "--quiet", "--out", str(tmp_path / "x"),
                     *bad]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0]
        assert not (tmp_path / "x").exists()


def test_results_add_puts_two_configurations_side_by_side() -> None:
    on = nightjar.simulate("steady_low", RTX, ["nightjar+"], oracle=False, offload="on")
    off = nightjar.simulate("steady_low", RTX, ["nightjar+"], oracle=False, offload="off")
    both = on + off
    assert len(both) == 2 and both.offload is None
    frame = both.frame()
    assert list(frame["offload"]) == ["on", "off"]
    assert frame["command"].str.contains("nightjar.simulate").all()
