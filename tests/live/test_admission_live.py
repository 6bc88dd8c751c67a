"""Issue 15: the batch the live scheduler prices K at (``nightjar.core.admission.step_batch``,
the simulator's rule) is the batch vLLM then schedules, admission steps included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import nightjar.cli as cli


@pytest.fixture(autouse=True)
def _live_command(monkeypatch: pytest.MonkeyPatch) -> None:
    if "live" not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, "live"))


def test_the_priced_batch_is_the_scheduled_batch(tiny: Any, tmp_path: Path) -> None:
    # One request decodes (long enough to still run when the burst comes, on a fast or
    # a loaded machine); then a burst of 8 arrives at once. How many of the 8 one step
    # admits depends on how the replay's submissions interleave with the engine's steps
    # (on a loaded machine one by one), so the test asks for admission while decoding,
    # and the equality on every step is the point.
    reqs = [{"arrival_s": 0.0, "prompt_tokens": 16, "output_tokens": 160}]
    reqs += [{"arrival_s": 0.6, "prompt_tokens": 20 + 3 * i, "output_tokens": 6}
             for i in range(8)]
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"format_version": 1, "name": "t", "requests": reqs}))
    out = tmp_path / "out"
    argv = ["live", "--model", str(tiny.target), "--draft", str(tiny.draft), "--trace",
            str(trace), "--policy", "fixed:2", "--gamma-max", "2", "--max-model-len", "256",
            "--kv-cache-gb", "0.05", "--no-report", "--quiet", "--out", str(out)]
    assert cli.main(argv) == 0
    rows = [json.loads(line) for line in (out / ".steps-0.jsonl").read_text().splitlines()]
    steps = [r for r in rows if r["kind"] == "step" and r["scheduled"]]
    assert steps
    admitting = [r for r in steps if r["prefill_tokens"] and r["batch_size"]]
    shown = [(r["batch_size"], r["scheduled"], r["priced_batch"]) for r in steps[:40]]
    # Some step admitted prompts while a request was decoding.
    assert any(r["scheduled"] > r["batch_size"] for r in admitting), shown
    for r in steps:
        assert r["priced_batch"] == r["scheduled"], r
