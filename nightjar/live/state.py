"""Nightjar's live state as a small JSON snapshot file, for ``--serve`` metrics.

The scheduler runs in vLLM's engine-core process while ``/metrics`` is served by
the API-server process, so the state crosses processes through a file. Unlike the
step log (one line per step, unbounded), the snapshot is a fixed-size JSON object
rewritten atomically (write + ``os.replace``) at most every ``interval_s``, so a
server can run for days; readers never see a half-written file.
Imports neither vllm nor torch.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nightjar.core.records import StepRecord


@dataclass(slots=True)
class LiveState:
    """Counters are totals since the engine started; gauges describe the last step."""

    policy: str = ""
    gamma: int = 0  # K verified in the last step
    chosen_gamma: int = 0  # the policy's last choice (before clamping)
    gamma_max: int = 0
    draft_state: str = "resident"
    batch_size: int = 0
    kv_total_blocks: int = 0  # blocks the scheduler may hand out now
    kv_withheld_blocks: int = 0  # the draft's ballast, withheld while it is resident
    kv_used_blocks: int = 0  # blocks held by requests (not the ballast)
    kv_free_blocks: int = 0  # blocks free for requests
    steps: int = 0
    spec_steps: int = 0  # steps that verified drafts (gamma > 0)
    drafted: int = 0
    accepted: int = 0
    emitted: int = 0
    offloads: int = 0  # completed offloads
    reloads: int = 0  # completed reloads
    migrated_blocks: int = 0  # KV blocks copied out of the ballast region by reloads
    updated_mono: float = 0.0


class StateWriter:
    """Keeps a :class:`LiveState` and rewrites the snapshot file, rate-limited."""

    def __init__(self, path: str | None, policy: str, gamma_max: int, interval_s: float = 0.25):
        self.path = Path(path) if path else None
        self.state = LiveState(policy=policy, gamma_max=gamma_max)
        self.interval_s = interval_s
        self._last = -1e18
        self.flush()

    def step(self, record: StepRecord, chosen: int, withheld: int) -> None:
        s = self.state
        s.gamma, s.chosen_gamma = record.gamma, chosen
        s.draft_state, s.batch_size = record.draft_state, record.batch_size
        s.kv_total_blocks, s.kv_withheld_blocks = record.kv_total_blocks, withheld
        s.kv_used_blocks = record.kv_used_blocks
        s.kv_free_blocks = max(0, record.kv_total_blocks - record.kv_used_blocks)
        s.steps += 1
        s.spec_steps += int(record.gamma > 0 and record.batch_size > 0)
        s.drafted += record.drafted
        s.accepted += record.accepted
        s.emitted += record.emitted
        self.maybe_flush()

    def kv(self, total: int, free: int, withheld: int, flush: bool) -> None:
        """Pool figures outside a step (a request freed or aborted); ``flush`` when idle,
        since the engine may not step again for a long time."""
        s = self.state
        s.kv_total_blocks, s.kv_free_blocks, s.kv_withheld_blocks = total, free, withheld
        s.kv_used_blocks = max(0, total - free)
        if flush:
            self.flush()

    def residency_done(self, command: str, migrated: int = 0) -> None:
        self.state.migrated_blocks += migrated
        if command == "offload":
            self.state.offloads += 1
        else:
            self.state.reloads += 1
        self.flush()  # rare and worth seeing at once

    def maybe_flush(self) -> None:
        if time.monotonic() - self._last >= self.interval_s:
            self.flush()

    def flush(self) -> None:
        if self.path is None:
            return
        self._last = self.state.updated_mono = time.monotonic()
        tmp = self.path.with_name(self.path.name + f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(self.state)), encoding="utf-8")
        os.replace(tmp, self.path)


def read_state(path: str | Path) -> LiveState | None:
    """The last snapshot, or None before the engine has written one."""
    try:
        data: dict[str, Any] = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    known = set(LiveState.__dataclass_fields__)
    return LiveState(**{k: v for k, v in data.items() if k in known})
