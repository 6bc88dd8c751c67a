"""Issue 15: a live run's summary counts the policy's profile lookups beyond the
profile's grid (priced off it), as the simulator's ``context_clamped_steps``
does, and ``nightjar live`` prints them. The profile is a bundled one cut to
contexts >= 1024, so the tiny run's short contexts all lie below its grid."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nightjar.cli as cli
from nightjar.profile.profile import DEFAULT_PROFILE, load_profile


@pytest.fixture(autouse=True)
def _live_command(monkeypatch: pytest.MonkeyPatch) -> None:
    if "live" not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, "live"))


def test_live_summary_counts_off_grid_lookups(tiny: Any, tmp_path: Path, capsys: Any) -> None:
    data = load_profile(DEFAULT_PROFILE).to_json()
    data["decode"] = [row for row in data["decode"] if row[2] >= 1024]
    data["draft_forward"] = [row for row in data["draft_forward"] if row[1] >= 1024]
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(data))
    trace = tmp_path / "t.json"
    reqs = [{"arrival_s": 0.1 * i, "prompt_tokens": 12 + 5 * i, "output_tokens": 10}
            for i in range(4)]
    trace.write_text(json.dumps({"format_version": 1, "name": "t", "requests": reqs}))
    out = tmp_path / "out"
    argv = ["live", "--model", str(tiny.target), "--draft", str(tiny.draft), "--trace",
            str(trace), "--policy", "nightjar+", "--gamma-max", "2", "--profile", str(profile),
            "--max-model-len", "256", "--kv-cache-gb", "0.05", "--no-report", "--quiet",
            "--out", str(out)]
    assert cli.main(argv) == 0
    row = pd.read_csv(out / "summary.csv").iloc[0]
    assert row["off_grid_lookups"] > 0
    assert 0 < row["off_grid_steps"] <= row["off_grid_lookups"]
    assert "nightjar+: " in capsys.readouterr().err  # with the "wrote" line
