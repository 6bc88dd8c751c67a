"""``nightjar sweep``: the grid, the table and report, resuming, and interruption."""

from __future__ import annotations

import json
import math
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nightjar
from nightjar.cli import main
from nightjar.core.slo import Slo
from nightjar.results.metrics import Stat, Summary
from nightjar.trace.trace import load_trace

REPO = Path(__file__).resolve().parents[1]


def small_trace(folder: Path) -> Path:
    """A 20 s generative trace at two rates: one cell runs in a fraction of a second."""
    path = folder / "small.json"
    doc = {"format_version": 1, "name": "small", "seed": 3, "workload": "alpaca",
           "segments": [{"duration_s": 10, "rate_rps": 4}, {"duration_s": 10, "rate_rps": 12}]}
    path.write_text(json.dumps(doc))
    return path


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nightjar.cli", *args], capture_output=True,
                          text=True, cwd=REPO, timeout=600)


def cell_files(out: Path) -> dict[str, float]:
    return {p.name: p.stat().st_mtime_ns for p in (out / "cells").iterdir()}


def summary_columns() -> set[str]:
    cols: set[str] = set()
    for f in fields(Summary):
        if f.name in ("policy", "engine", "trace", "extra"):
            continue
        if f.name in ("ttft_s", "tpot_s", "e2e_s"):
            cols |= {f"{f.name}_{s.name}" for s in fields(Stat)}
        elif f.name == "slo":
            cols |= {f"slo_{s.name}" for s in fields(Slo)}
        else:
            cols.add(f.name)
    return cols


@pytest.mark.slow
def test_issue_sweep_writes_table_and_report_then_resumes_without_work(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    args = ["sweep", "--trace", "alpaca-burst", "--rate-scale", "0.5,1,2", "--seeds", "3",
            "--policy", "nospec", "--policy", "fixed:3", "--policy", "nightjar+",
            "--jobs", "2", "--out", str(out)]
    first = cli(*args)
    assert first.returncode == 0, first.stderr
    assert "27 cells: 27 computed, 0 reused" in first.stderr
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 27 and table["cell"].is_unique
    assert summary_columns() <= set(table.columns)
    assert sorted(set(table["rate_scale"])) == [0.5, 1.0, 2.0]
    assert sorted(set(table["seed"])) == [0, 1, 2]
    assert list(dict.fromkeys(table["policy"])) == ["nospec", "fixed:3", "nightjar+"]
    # Each cell says what it was beyond its parameters: its inputs by hash, the
    # acceptance it assumed, the build, and the sweep's command (a worker's is not it).
    assert table["command"].unique().tolist() == [shlex.join(["nightjar", *args])]
    assert table["trace_requests"].min() > 0 and table["nightjar_version"].notna().all()
    assert table["profile_sha256"].nunique() == 1 and table["trace_sha256"].nunique() == 9
    assert table["acceptance_source"].str.contains("alpaca").all()
    # A rate scale of 2 is twice the offered load of 1 (same requests, half the span).
    by_scale = table.groupby("rate_scale")["rate_rps"].mean()
    assert by_scale[2.0] == pytest.approx(2 * by_scale[1.0])
    if (out / "results.parquet").exists():
        pd.testing.assert_frame_equal(pd.read_parquet(out / "results.parquet"), table,
                                      check_dtype=False)
    html = (out / "report.html").read_text()
    for text in ("TTFT p99", "TPOT p50", "goodput", "SLO attainment", "SLO: TTFT &lt;= 2 s"):
        assert text in html
    assert "SLO: TTFT <= 2 s, TPOT <= 100 ms" in first.stdout
    before = cell_files(out)
    assert len(before) == 27

    again = cli(*args)
    assert again.returncode == 0, again.stderr
    assert "27 cells: 0 computed, 27 reused" in again.stderr
    assert cell_files(out) == before  # not one cell rewritten
    pd.testing.assert_frame_equal(pd.read_csv(out / "results.csv"), table)


def test_cell_at_seed_0_is_the_run_nightjar_sim_makes() -> None:
    frame = nightjar.results_frame(nightjar.simulate("steady_low", policies=["fixed:3"]))
    from nightjar.sweep.backends import run_tasks
    from nightjar.sweep.run import plan
    from nightjar.sweep.spec import build_spec

    rows: list[dict[str, object]] = []
    spec = build_spec({"trace": "steady_low", "policy": ["fixed:3"]})
    run_tasks(plan(spec), jobs=1, ray=None, done=lambda task, row, error: rows.append(row))
    (row,) = rows
    for col in ("throughput_tok_s", "ttft_s_p99", "tpot_s_p50", "goodput_req_s",
                "slo_attainment", "mean_gamma"):
        assert row[col] == pytest.approx(frame.loc[0, col], rel=1e-12)


def test_rate_scale_and_seeds() -> None:
    trace = load_trace("alpaca-burst")
    fast = trace.rate_scaled(2.0)
    np.testing.assert_allclose(fast.arrival_s, trace.arrival_s / 2)
    assert fast.duration_s == pytest.approx(trace.duration_s / 2)
    np.testing.assert_array_equal(fast.output_tokens, trace.output_tokens)
    assert trace.rate_scaled(1.0) is trace


def test_larger_grid_in_the_same_folder_computes_only_new_cells(tmp_path: Path) -> None:
    trace = str(small_trace(tmp_path))
    out = tmp_path / "out"
    base = ["sweep", "--trace", trace, "--policy", "nospec", "--policy", "fixed:2",
            "--jobs", "1", "--out", str(out), "--no-report", "--quiet"]
    assert main([*base, "--seeds", "2"]) == 0
    first = cell_files(out)
    assert len(first) == 4
    assert main([*base, "--seeds", "3"]) == 0
    second = cell_files(out)
    assert len(second) == 6
    assert {k: second[k] for k in first} == first
    table = pd.read_csv(out / "results.csv")
    assert len(table) == 6
    # Seeds redraw a generative trace: different arrivals, so different request counts.
    assert table.groupby("seed")["requests_total"].first().nunique() > 1


def test_config_file_is_copied_and_flags_override_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = small_trace(tmp_path)
    config = tmp_path / "exp.toml"
    config.write_text(
        f'trace = ["{trace}"]\nrate_scale = [1.0, 1.5]\nseeds = 1\n'
        'policy = ["nospec", "fixed:1"]\nslo_ttft = 0.5\n'
    )
    out = tmp_path / "out"
    code = main(["sweep", "--config", str(config), "--policy", "fixed:2", "--out", str(out),
                 "--jobs", "1", "--quiet", "--no-report"])
    assert code == 0
    assert (out / "experiment.toml").read_text() == config.read_text()
    table = pd.read_csv(out / "results.csv")
    assert set(table["policy"]) == {"fixed:2"}
    assert sorted(set(table["rate_scale"])) == [1.0, 1.5]
    assert set(table["slo_ttft_s"]) == {0.5}
    assert "SLO: TTFT <= 0.5 s" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("toml", "flags", "message"),
    [
        ("polcy = ['nospec']\n", [], "unknown key 'polcy' (did you mean 'policy'?)"),
        ("rate_scale = []\n", [], "rate_scale: empty grid: no values"),
        ("", ["--seeds", "0"], "--seeds must be >= 1"),
        ("", ["--rate-scale", "0"], "--rate-scale 0.0: must be a finite number > 0"),
        ("", ["--rate-scale", "1,-2"], "--rate-scale -2.0"),
        ("", ["--rate-scale", "fast"], "--rate-scale: bad value 'fast'"),
        ("", ["--rate-scale", "inf"], "--rate-scale inf"),
        ("", ["--rate-scale", "1,,2"], "empty item"),
        ("rate_scale = ['x']\n", [], "rate_scale 'x'"),
        ("", ["--offload", "maybe"], "--offload 'maybe': choose from auto, on, off"),
        ("", ["--policy", "warp:9"], "unknown policy 'warp:9'"),
        ("", ["--gamma-max", "9"], "--gamma-max 9 exceeds profile"),
        ("", ["--trace", "nope"], "trace 'nope' not found"),
        ("slo_tpot = -1\n", [], "slo_tpot -1: must be a finite number of seconds > 0"),
        ("seeds = [1, 1]\n", [], "seeds lists a value twice"),
        ("[sweep\n", [], "malformed TOML"),
    ],
)
def test_bad_specs_get_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], toml: str, flags: list[str], message: str
) -> None:
    config = tmp_path / "exp.toml"
    config.write_text(toml)
    out = tmp_path / "out"
    code = main(["sweep", "--config", str(config), "--trace", str(small_trace(tmp_path)),
                 *flags, "--out", str(out),
                 "--quiet", "--jobs", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.count("\n") == 1, err
    assert not (out / "cells").exists() or not any((out / "cells").iterdir())


def test_refuses_a_folder_that_is_not_a_sweep(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    code = main(["sweep", "--trace", str(small_trace(tmp_path)), "--policy", "nospec",
                 "--out", str(mine), "--quiet"])
    assert code == 2 and "not a sweep" in capsys.readouterr().err
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _default_signals() -> None:
    # The sweep starts as a terminal's would: a test process whose signals are ignored
    # (started in the background of a script) or blocked passes that on, and the sweep
    # then finishes (exit 0; twice so in loaded CI runs of the whole suite).
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOPS)
    for sig in _STOPS:
        signal.signal(sig, signal.SIG_DFL)


def _start_and_stop(out: Path, sig: int) -> tuple[int, str]:
    """Start a sweep, stop it with ``sig`` once two cells are saved, return (rc, stderr);
    skips, with the count, where the sweep ended before the signal could land."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "nightjar.cli", "sweep", "--trace", "alpaca-burst",
         "--rate-scale", "0.5,1", "--seeds", "2", "--policy", "nospec", "--policy", "fixed:3",
         "--jobs", "2", "--out", str(out), "--quiet", "--no-report"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=_default_signals,
    )
    deadline = time.monotonic() + 120
    cells = out / "cells"
    while time.monotonic() < deadline and proc.poll() is None:
        if cells.is_dir() and len([p for p in cells.iterdir() if p.suffix == ".json"]) >= 2:
            break
        time.sleep(0.02)
    if proc.poll() is not None:
        saved = len(list(cells.glob("*.json")))
        pytest.skip(f"the sweep ended (exit {proc.returncode}, {saved} of 8 cells saved) "
                    "before the signal could stop it")
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_sweep_leaves_no_half_cell_and_resumes(
    tmp_path: Path, sig: signal.Signals
) -> None:
    out = tmp_path / "out"
    rc, err = _start_and_stop(out, sig)
    if sig == signal.SIGINT:
        # What this process would have passed on, had the sweep not reset it.
        passed_on = (signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, []))
        assert rc == 130 and "interrupted" in err, (rc, passed_on, err[-500:])
        assert f"run the same command with --out {out} to resume" in err
    else:
        assert rc == -signal.SIGKILL
    saved = [p for p in (out / "cells").iterdir() if not p.name.startswith(".")]
    assert 2 <= len(saved) < 8  # stopped part-way
    for path in saved:  # every cell file is whole
        doc = json.loads(path.read_text())
        assert doc["row"]["cell"] == path.stem
        assert math.isfinite(doc["row"]["throughput_tok_s"])
    if sig == signal.SIGINT:  # a clean stop leaves no temporary file either
        assert not [p for p in (out / "cells").iterdir() if p.name.startswith(".")]
    kept = cell_files(out)
    resumed = cli("sweep", "--trace", "alpaca-burst", "--rate-scale", "0.5,1", "--seeds", "2",
                  "--policy", "nospec", "--policy", "fixed:3", "--jobs", "2",
                  "--out", str(out), "--quiet", "--no-report")
    assert resumed.returncode == 0, resumed.stderr
    done = len([k for k in kept if not k.startswith(".")])
    assert f"8 cells: {8 - done} computed, {done} reused" in resumed.stderr
    after = cell_files(out)
    assert all(after[k] == kept[k] for k in kept if not k.startswith("."))
    assert not [k for k in after if k.startswith(".")]  # stale temporaries are cleared
    assert len(pd.read_csv(out / "results.csv")) == 8


def test_core_and_local_sweeps_work_without_ray_or_pyarrow(tmp_path: Path) -> None:
    """The cluster extra is optional: hide ray and pyarrow, and the sweep still runs
    (CSV only), while --ray says what to install in one line."""
    trace = small_trace(tmp_path)
    script = f"""
import sys
sys.modules["ray"] = None; sys.modules["pyarrow"] = None  # import now raises ImportError
from nightjar.cli import main
rc = main(["sweep", "--trace", {str(trace)!r}, "--policy", "nospec", "--jobs", "1",
           "--out", {str(tmp_path / "out")!r}, "--quiet", "--no-report"])
assert rc == 0, rc
rc = main(["sweep", "--trace", {str(trace)!r}, "--policy", "nospec", "--ray", "local",
           "--out", {str(tmp_path / "out2")!r}, "--quiet"])
assert rc == 2, rc
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "--ray needs the 'ray' package" in proc.stderr
    assert (tmp_path / "out" / "results.csv").is_file()
    assert not (tmp_path / "out" / "results.parquet").exists()


class _Explodes:
    """A policy that fails at seed 1: a stand-in for a policy bug."""

    name = "explode"

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def decide(self, ctx: object) -> int:
        if self.seed == 1:
            raise ZeroDivisionError("float division by zero")
        return 1

    def observe(self, outcome: object) -> None:
        pass


def test_a_failing_cell_is_reported_not_saved_and_the_others_finish(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from nightjar.policies import registry as policy

    policy.registered()  # load the real registry first
    info = policy.PolicyInfo("explode", lambda arg, env: _Explodes(env.seed), "test", ("explode",))
    monkeypatch.setitem(policy._REGISTRY, "explode", info)
    out = tmp_path / "out"
    args = ["sweep", "--trace", str(small_trace(tmp_path)), "--policy", "nospec", "--policy",
            "explode", "--seeds", "2", "--jobs", "1", "--out", str(out), "--quiet"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "4 cells" not in err and "3 cells: 3 computed, 0 reused, 1 failed" in err
    assert "failed cell" in err and "seed=1 policy=explode: ZeroDivisionError" in err
    assert len(list((out / "cells").iterdir())) == 3
    assert len(pd.read_csv(out / "results.csv")) == 3
    assert main(args) == 1  # a rerun retries only the failed cell
    assert "3 cells: 0 computed, 3 reused, 1 failed" in capsys.readouterr().err
