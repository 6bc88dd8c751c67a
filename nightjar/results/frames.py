"""Long ("tidy") frames of many runs: one row per request or per step, each row naming its run.

What a notebook wants for plotly express or a groupby: every run's records stacked,
with the run's ``policy``, ``engine``, ``trace``, ``profile`` and ``seed`` as columns,
so ``px.ecdf(frame, x="tpot_s", color="policy")`` needs no glue. Integer fields stay
int64 (a request's ``preemptions``, a step's ``gamma``); times are float seconds.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from nightjar.core.records import RunResult

RUN_COLUMNS = ("policy", "engine", "trace", "profile", "seed")
PER = ("run", "request", "step")
# No run: the frames still have every column (and no row).
_NONE = RunResult(policy="", engine="", trace="", profile="", seed=0, duration_s=0.0)


def _tagged(result: RunResult, frame: pd.DataFrame) -> pd.DataFrame:
    head = pd.DataFrame({
        "policy": pd.Series([result.policy] * len(frame), dtype=object),
        "engine": pd.Series([result.engine] * len(frame), dtype=object),
        "trace": pd.Series([result.trace] * len(frame), dtype=object),
        "profile": pd.Series([result.profile] * len(frame), dtype=object),
        "seed": pd.Series([result.seed] * len(frame), dtype="int64"),
    })
    return pd.concat([head, frame.reset_index(drop=True)], axis=1)


def request_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    """Every request of every run, with ``ttft_s``, ``tpot_s``, ``e2e_s`` and the run's
    columns first."""
    runs = list(results) or [_NONE]
    return pd.concat([_tagged(r, r.requests_frame()) for r in runs], ignore_index=True)


def step_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    """Every engine step of every run, with the run's columns first."""
    runs = list(results) or [_NONE]
    return pd.concat([_tagged(r, r.steps_frame()) for r in runs], ignore_index=True)
