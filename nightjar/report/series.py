"""What the report plots, reduced to a bounded number of points whatever the run length.

Time series: every run is cut into ``TIME_BINS`` equal time bins over the same span
(the longest run), so that policies line up on one time axis. Per bin: the step-weighted
mean of batch size, waiting queue, step time and KV blocks; the mean gamma over decode
steps (a bin where gamma switched shows a fractional gamma); output throughput =
emitted tokens / bin width; acceptance = accepted / drafted tokens; the share of steps
with the draft resident. A bin without steps is NaN (drawn as a gap), except
throughput, which is 0 there. Latency ECDFs are drawn at ``ECDF_POINTS`` quantiles;
arrivals are counted in ``TIME_BINS`` bins.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from nightjar.core.records import RunResult

TIME_BINS = 240
ECDF_POINTS = 300
# Matches nightjar.core.memory.DraftState.RESIDENT's value (compared case-insensitively).
RESIDENT = "resident"
# Batch-size bins of the gamma x batch heatmap: powers of two, as profiles tabulate.
BATCH_EDGES = (1, 2, 3, 5, 9, 17, 33, 65, 129, 257, 513)

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class TimeSeries:
    """Per-bin values of one run (``time_s`` = bin start); NaN where a bin is empty."""

    time_s: F64
    batch_size: F64
    waiting: F64
    gamma: F64
    step_ms: F64
    throughput_tok_s: F64
    acceptance: F64
    kv_used: F64
    kv_total: F64
    resident: F64  # share of the bin's steps with the draft resident


def span_of(results: list[RunResult]) -> float:
    """The common time axis: to the latest step end or arrival of any run."""
    ends = [r.duration_s for r in results if np.isfinite(r.duration_s)]
    for r in results:
        if r.steps:
            last = r.steps[-1]
            ends.append(last.time_s + last.step_time_s)
        if r.requests:
            ends.append(max(q.arrival_s for q in r.requests))
    return max([*ends, 1e-9])


def _column(result: RunResult, name: str) -> F64:
    return np.fromiter(
        (float(getattr(s, name)) for s in result.steps), np.float64, len(result.steps)
    )


def time_series(result: RunResult, span_s: float, bins: int = TIME_BINS) -> TimeSeries:
    edges = np.linspace(0.0, span_s, bins + 1)
    width = edges[1] - edges[0]
    start = _column(result, "time_s")
    idx = np.clip(np.searchsorted(edges, start, side="right") - 1, 0, bins - 1)
    count = np.bincount(idx, minlength=bins).astype(np.float64)

    def total(values: F64, where: npt.NDArray[np.bool_] | None = None) -> F64:
        w = values if where is None else np.where(where, values, 0.0)
        return np.bincount(idx, weights=w, minlength=bins).astype(np.float64)

    def mean(values: F64) -> F64:
        out: F64 = np.divide(total(values), count, out=np.full(bins, np.nan), where=count > 0)
        return out

    batch = _column(result, "batch_size")
    decode = batch >= 1
    n_decode = total(np.ones_like(batch), decode)
    gamma_sum = total(_column(result, "gamma"), decode)
    drafted = total(_column(result, "drafted"))
    states = [s.draft_state.lower() == RESIDENT for s in result.steps]
    resident = np.asarray(states, dtype=np.float64)
    return TimeSeries(
        time_s=edges[:-1],
        batch_size=mean(batch),
        waiting=mean(_column(result, "num_waiting")),
        gamma=np.divide(gamma_sum, n_decode, out=np.full(bins, np.nan), where=n_decode > 0),
        step_ms=mean(_column(result, "step_time_s") * 1e3),
        throughput_tok_s=total(_column(result, "emitted")) / width,
        acceptance=np.divide(
            total(_column(result, "accepted")), drafted, out=np.full(bins, np.nan),
            where=drafted > 0,
        ),
        kv_used=mean(_column(result, "kv_used_blocks")),
        kv_total=mean(_column(result, "kv_total_blocks")),
        resident=mean(resident),
    )


def arrival_rate(result: RunResult, span_s: float, bins: int = TIME_BINS) -> tuple[F64, F64]:
    """(bin starts, requests arriving per second in each bin)."""
    arrivals = np.array([r.arrival_s for r in result.requests], dtype=np.float64)
    hist, edges = np.histogram(arrivals, bins=bins, range=(0.0, span_s))
    return edges[:-1], hist / np.diff(edges)


def ecdf(values: F64, points: int = ECDF_POINTS) -> tuple[F64, F64]:
    """(quantile values, probabilities) of the finite values; empty when none."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return np.array([]), np.array([])
    probs = np.linspace(0.0, 1.0, min(points, values.size))
    return np.quantile(values, probs), probs


def max_batch(results: list[RunResult]) -> int:
    return max([1, *(s.batch_size for r in results for s in r.steps)])


def gamma_batch_share(
    result: RunResult, gamma_max: int, batch_top: int
) -> tuple[list[str], F64, F64]:
    """Decode steps by batch-size bin (rows) and gamma (columns, 0..gamma_max).

    Bins are powers of two up to ``batch_top`` (pass the largest batch of every run
    drawn side by side, so they share rows). Returns (bin labels, share of each
    row's steps in % (NaN for an empty row), step counts). Gammas above
    ``gamma_max`` count in the last column.
    """
    batch = _column(result, "batch_size").astype(np.int64)
    gamma = np.clip(_column(result, "gamma").astype(np.int64), 0, gamma_max)
    decode = batch >= 1
    top = max(batch_top, int(batch.max()) if batch.size else 1, 1)
    edges = sorted({*(e for e in BATCH_EDGES if e <= top), top + 1})
    row = np.searchsorted(edges, batch[decode], side="right") - 1
    counts = np.zeros((len(edges) - 1, gamma_max + 1))
    np.add.at(counts, (row, gamma[decode]), 1.0)
    per_row = counts.sum(axis=1, keepdims=True)
    share = np.divide(
        counts * 100.0, per_row, out=np.full_like(counts, np.nan), where=per_row > 0
    )
    labels = [
        str(lo) if hi - lo == 1 else f"{lo}-{hi - 1}"
        for lo, hi in itertools.pairwise(edges)
    ]
    return labels, share, counts
