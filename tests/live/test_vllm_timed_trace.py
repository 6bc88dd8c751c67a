"""`nightjar trace export --format vllm-timed-trace` read back by vLLM 0.34's own
``timed_trace`` loader (the one `vllm bench serve --dataset-name timed_trace` uses):
every request at its arrival time, with its prompt and output lengths."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nightjar.cli import main
from nightjar.trace.trace import load_trace
from tests.live.test_vllm_releases import REPO, _path

pytestmark = pytest.mark.live
READER = Path(__file__).resolve().parent / "releases" / "timed_trace.py"


def test_vllm_replays_an_exported_trace_at_its_times_and_lengths(
    tiny: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "burst.jsonl"
    assert main(["trace", "export", "alpaca-burst", "--format", "vllm-timed-trace",
                 "--out", str(out)]) == 0
    assert "--dataset-name timed_trace" in capsys.readouterr().out
    env = {**os.environ, "PYTHONPATH": _path("0.34.0")}
    proc = subprocess.run([sys.executable, str(READER), str(out), str(tiny.target)],
                          env=env, capture_output=True, text=True, timeout=600, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["vllm"].split("+")[0] == "0.34.0"
    rows = np.array(got["rows"])
    trace = load_trace("alpaca-burst")
    assert len(rows) == len(trace)
    start = float(trace.arrival_s.min())
    assert np.allclose(rows[:, 0], trace.arrival_s - start, atol=1e-6)
    assert (rows[:, 1] == trace.prompt_tokens).all()
    assert (rows[:, 2] == trace.output_tokens).all()
