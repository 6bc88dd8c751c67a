"""``nightjar live --trace`` replays a trace through vLLM's async engine and writes the
same per-request and per-step CSVs, summary and report as ``nightjar sim``, which
``nightjar validate --live-run`` reads back."""

from __future__ import annotations

import json
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import nightjar.cli as cli
from nightjar.core.records import RequestRecord, StepRecord


@pytest.fixture(autouse=True)
def _live_command(monkeypatch: pytest.MonkeyPatch) -> None:
    if "live" not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, "live"))


def test_replay_writes_sim_compatible_outputs(
    tiny: Any, make_llm: Any, tmp_path: Path, capsys: Any
) -> None:
    trace = tmp_path / "t.json"
    reqs = [
        {"arrival_s": 0.15 * i, "prompt_tokens": 10 + 7 * i, "output_tokens": 12 + 5 * i}
        for i in range(6)
    ]
    trace.write_text(json.dumps({"format_version": 1, "name": "t", "requests": reqs}))
    out = tmp_path / "out"
    code = cli.main(
        [
            "live",
            "--model",
            str(tiny.target),
            "--draft",
            str(tiny.draft),
            "--trace",
            str(trace),
            "--policy",
            "nospec",
            "--policy",
            "fixed:3",
            "--max-model-len",
            "256",
            "--kv-cache-gb",
            "0.05",
            "--out",
            str(out),
            "--profile",
            "a100-80gb/vicuna-13b+vicuna-68m",
            "--profile-out",
            str(tmp_path / "fitted-at-the-end.json"),
        ]
    )
    assert code == 0
    for slug in ("nospec", "fixed-3"):
        requests = pd.read_csv(out / slug / "requests.csv")
        steps = pd.read_csv(out / slug / "steps.csv")
        assert {f.name for f in fields(RequestRecord)} <= set(requests.columns)
        assert {f.name for f in fields(StepRecord)} <= set(steps.columns)
        assert len(requests) == 6 and requests["finish_s"].notna().all()
        assert (requests["first_token_s"] >= requests["arrival_s"]).all()
        assert steps["emitted"].sum() >= requests["output_tokens"].sum()
    spec = pd.read_csv(out / "fixed-3" / "requests.csv")
    assert spec["drafted"].sum() > 0 and spec["accepted"].sum() > 0
    assert (out / "summary.csv").exists() and (out / "report.html").exists()
    steps = pd.read_csv(out / "fixed-3" / "steps.csv")
    decode = steps[steps["batch_size"] > 0]
    assert decode["mean_context_len"].notna().all() and (decode["mean_context_len"] >= 10).all()
    # vLLM's full log (INFO lines from the engine-core processes too) is in the output
    # folder, and the logging set-up does not outlive the command.
    engine_log = (out / "vllm.log").read_text()
    assert "INFO" in engine_log and "EngineCore" in engine_log
    assert "VLLM_LOGGING_CONFIG_PATH" not in os.environ

    # The validator replays the live run in the simulator (a GPU profile here: the
    # point is that the folder reads back and the steps line up, not the error).
    capsys.readouterr()
    profile = "a100-80gb/vicuna-13b+vicuna-68m"
    for slug in ("nospec", "fixed-3"):
        assert cli.main(["validate", "--live-run", str(out / slug), "--profile", profile]) == 0
        shown = capsys.readouterr().out
        assert "pure decode steps" in shown and "live vs sim" in shown

    # A profile fitted from the run's own steps prices them nearer than its base: the
    # GPU base is far from this CPU (a median factor of 12 here), and the cells the steps
    # reached move toward the CPU's times (part way: a few dozen steps per cell, each
    # cell shrunk toward the base as if it were PRIOR_STEPS steps of its own).
    from nightjar.fidelity.compare import priced_steps
    from nightjar.profile.profile import load_profile
    from nightjar.results.read import load_runs

    fitted = tmp_path / "fitted.json"
    assert cli.main(["profile", "--from-run", str(out), "--base", profile,
                     "--out", str(fitted)]) == 0
    assert "cells fitted from" in capsys.readouterr().out
    # --profile-out wrote the same fit at the end of the run.
    at_end = json.loads((tmp_path / "fitted-at-the-end.json").read_text())
    assert at_end["decode"] == json.loads(fitted.read_text())["decode"]
    runs = load_runs(out)
    errors = []
    for priced_on in (load_profile(profile), load_profile(str(fitted))):
        steps = pd.concat([priced_steps(r, priced_on, False) for r in runs])
        decode = steps[steps["kind"] == "decode"]
        errors.append(float(np.abs(np.log(decode["step_time_s"] / decode["priced_s"])).median()))
    base_error, fitted_error = errors
    assert fitted_error < 0.8 * base_error, errors
