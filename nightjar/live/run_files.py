"""The files a live run keeps beside its results folder: one step log per policy's run
(numbered in run order), the engine's settings as vLLM resolved them, and the step
table measured in each run (reusable as ``--profile``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nightjar.core.records import StepRecord
from nightjar.errors import NightjarInputError

ENGINE_FILE = "engine.json"
STEP_TABLE_FILE = "step_table.json"


def step_log_path(out: Path, index: int) -> Path:
    """The ``index``-th run's step log (0-based), emptied: the scheduler appends."""
    path = out / f".steps-{index}.jsonl"
    path.unlink(missing_ok=True)
    return path


def read_engine_facts(step_log: Path) -> dict[str, Any]:
    """The engine's settings the scheduler read back at start-up ({} without them)."""
    from nightjar.live.steplog import read_log

    start = next((e for e in read_log(step_log).events if e.get("event") == "start"), {})
    return dict(start.get("engine") or {})


def write_engine_facts(folder: Path, facts: dict[str, Any]) -> None:
    (folder / ENGINE_FILE).write_text(json.dumps(facts, indent=1))


def write_step_table(folder: Path, steps: Sequence[StepRecord]) -> bool:
    """The run's measured step times as a step table, where it has enough steps (a run
    that never changed gamma has no per-gamma table); whether one was written."""
    from nightjar.live.profiling.latency import StepTable

    try:
        table = StepTable.from_steps(steps)
    except NightjarInputError:
        return False
    (folder / STEP_TABLE_FILE).write_text(json.dumps(table.to_json(), indent=1))
    return True
