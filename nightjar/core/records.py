"""Per-request and per-step records: what every engine writes, column for column.

The simulator and the live engine both produce these, so that their CSVs, summaries
and reports compare directly. Times are seconds from the start of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # frames are for readers; engines (the live plugins) never load pandas
    import pandas as pd



@dataclass(slots=True)
class RequestRecord:
    request_id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    first_token_s: float = float("nan")
    finish_s: float = float("nan")
    preemptions: int = 0
    drafted: int = 0
    accepted: int = 0
    # The request's acceptance rate: the sampled truth in the simulator, the
    # measured accepted/drafted ratio in the live engine.
    acceptance: float = float("nan")


@dataclass(slots=True)
class StepRecord:
    time_s: float  # when the step started
    step_time_s: float
    batch_size: int  # running decode requests in the step
    num_waiting: int
    gamma: int  # batch gamma that ran; for per-request decisions, the largest
    prefill_tokens: int
    drafted: int
    accepted: int
    emitted: int
    kv_used_blocks: int
    kv_total_blocks: int  # blocks the scheduler may hand out right now
    draft_state: str  # a nightjar.core.memory.DraftState value
    switch_cost_s: float = 0.0  # included in step_time_s
    clamped: bool = False
    # Mean tokens in the KV cache of the running decode requests (the profile's
    # context axis); NaN where the engine does not know it.
    mean_context_len: float = float("nan")


@dataclass(slots=True)
class RunResult:
    """One policy's run over one trace, on one engine."""

    policy: str
    engine: str  # "sim" or "live"
    trace: str
    profile: str
    seed: int
    duration_s: float
    requests: list[RequestRecord] = field(default_factory=list)
    steps: list[StepRecord] = field(default_factory=list)
    # Engine-specific scalars for the summary (offload counts, wall time, ...).
    extra: dict[str, float] = field(default_factory=dict)
    # What the run was: resolved settings, command, version, inputs by hash
    # (nightjar.results.provenance); written with the summary and read back with it.
    provenance: dict[str, Any] = field(default_factory=dict)

    def requests_frame(self) -> pd.DataFrame:
        """One row per request: the record's fields, then the latencies derived from
        them (``ttft_s``, ``e2e_s``, ``tpot_s``; NaN where undefined, see
        :func:`with_latencies`)."""
        return with_latencies(_frame(self.requests, RequestRecord))

    def steps_frame(self) -> pd.DataFrame:
        return _frame(self.steps, StepRecord)


def with_latencies(requests: pd.DataFrame) -> pd.DataFrame:
    """``requests`` with ``ttft_s`` = first token - arrival, ``e2e_s`` = finish - arrival
    and ``tpot_s`` = (finish - first token) / (output tokens - 1), NaN for a 1-token
    output or an unfinished request (docs/outputs.md)."""
    import numpy as np

    out = requests.copy()
    out["ttft_s"] = out["first_token_s"] - out["arrival_s"]
    out["e2e_s"] = out["finish_s"] - out["arrival_s"]
    multi = out["output_tokens"] > 1
    out["tpot_s"] = np.where(
        multi,
        (out["finish_s"] - out["first_token_s"]) / (out["output_tokens"] - 1).clip(lower=1),
        np.nan,
    )
    return out


def _frame(rows: list[RequestRecord] | list[StepRecord], cls: type) -> pd.DataFrame:
    import pandas as pd

    names = [f.name for f in fields(cls)]
    return pd.DataFrame({n: [getattr(r, n) for r in rows] for n in names}, columns=names)
