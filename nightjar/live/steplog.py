"""The record stream from the engine core to the caller: JSON lines in a file.

vLLM may run the scheduler in a separate engine-core process, so the scheduler
appends one JSON object per line and the caller reads the file after (or during)
the run. Kinds: ``step`` (a :class:`nightjar.core.records.StepRecord` plus the chosen
gamma and monotonic start time), ``request`` (per-request speculation counts when
a request finishes), ``event`` (offload/reload milestones) and ``summary``.
Times are ``time.monotonic()`` seconds, a clock shared by all processes of a host.
Imports neither vllm nor torch.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from nightjar.core.records import StepRecord


class StepLog:
    """Append-only writer; each record is flushed so a crash loses at most one line."""

    def __init__(self, path: str | None) -> None:
        self._fh: IO[str] | None = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    def write(self, kind: str, **data: Any) -> None:
        if self._fh is None:
            return
        self._fh.write(json.dumps({"kind": kind, **data}) + "\n")
        self._fh.flush()

    def step(self, record: StepRecord, *, start_mono: float, **extra: Any) -> None:
        self.write("step", start_mono=start_mono, **dataclasses.asdict(record), **extra)

    def reopen(self, path: str | None) -> None:
        """Append to ``path`` from now on (a new run on the same engine)."""
        self.close()
        self._fh = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


@dataclass
class LogContents:
    """What a step log holds, with step times made relative to ``t0`` (monotonic)."""

    steps: list[StepRecord] = field(default_factory=list)
    # The policy's own choice per step (before clamping), parallel to ``steps``.
    chosen_gamma: list[int] = field(default_factory=list)
    # request id -> {"drafted", "accepted", "preemptions"}
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, float] = field(default_factory=dict)
    # A summary follows the last request record: the engine went idle after it, so
    # ``summary`` covers every request above (the engine writes one at each idle point).
    idle: bool = False


_STEP_FIELDS = tuple(f.name for f in dataclasses.fields(StepRecord))


def read_log(path: str | Path, t0: float = 0.0) -> LogContents:
    """Parse the complete lines of a log that the engine may still be appending to.

    A fragment after the last newline is a record being written (the engine ticks on
    while its caller reads) or a crash's torn line: it is left out, never parsed.
    """
    out = LogContents()
    text = Path(path).read_text(encoding="utf-8") if Path(path).exists() else ""
    # Records end at "\n" only (a prompt-derived string may hold U+2028 raw).
    for line in text[: text.rfind("\n") + 1].split("\n"):
        if not line.strip():
            continue
        row = json.loads(line)
        kind = row.pop("kind")
        if kind == "step":
            values = {k: row[k] for k in _STEP_FIELDS}
            values["time_s"] = row["start_mono"] - t0
            out.steps.append(StepRecord(**values))
            out.chosen_gamma.append(int(row.get("chosen_gamma", values["gamma"])))
        elif kind == "request":
            out.idle = False
            out.requests[str(row["request_id"])] = {
                k: int(row[k]) for k in ("drafted", "accepted", "preemptions")
            }
        elif kind == "event":
            row["time_s"] = row.get("mono", t0) - t0
            out.events.append(row)
        elif kind == "summary":
            out.idle = True
            out.summary.update({k: float(v) for k, v in row.items()})
    return out
