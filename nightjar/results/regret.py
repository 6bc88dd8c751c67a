"""A run against its yardsticks: the bound (regret), the best static policy (adaptive
gain) and the per-step oracle (a reference).

*Per-token latency* (PTL) of a run = sum over steps of ``step_time_s * batch_size``
divided by the sum of ``emitted`` tokens: each running request waits the whole step,
so the numerator is request-seconds spent in steps and the ratio is the average time a
running request waits per generated token. ``step_time_s`` is the step's whole
duration (any switch cost included), so thrashing shows up here. Lower is better.

Three yardsticks, each named where it is reported:

- **regret vs bound** (``regret_bound_pct``, simulator only): the run's expected PTL
  over the least any batch-gamma schedule reaches on the run's own trajectory with
  the draft's rebuild charged (:mod:`nightjar.sim.yardstick`), - 1, in %. Never
  negative: the run's own schedule is one the bound considers.
- **gain vs static** (``gain_static_pct``): how much lower the run's PTL is than the
  best static policy's (``nospec``, ``fixed:G``, ``schedule:...``) among the runs of
  the same seed and trace, ``(1 - PTL / PTL_static) * 100``: the adaptive gain, which
  can be negative (a static policy did better).
- **vs the per-step oracle** (:class:`Regret`, ``step_oracle_pct``): PTL over the
  ``oracle`` run's, - 1. That oracle is myopic (it ignores switch costs) and runs its
  own trajectory, so a policy can beat it: a reference, not a bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from nightjar.core.records import RunResult
from nightjar.errors import NightjarInputError


@dataclass(frozen=True, slots=True)
class Yardsticks:
    """Where one run stands against the bound and the best static run (NaN: n/a)."""

    policy: str
    ptl_s: float
    bound_pct: float  # regret vs the bound on the run's own trajectory, %
    static: str  # the best static policy of the run's set ("" where none ran)
    static_gain_pct: float  # (1 - PTL / PTL_static) * 100


def bound_regret_pct(result: RunResult) -> float:
    """Expected PTL of the run's own schedule over the bound's, - 1, in % (NaN where
    the engine computed no bound: the live engine)."""
    own, bound = result.extra.get("expected_ptl_s"), result.extra.get("bound_ptl_s")
    if own is None or bound is None or not bound > 0:
        return math.nan
    return (own / bound - 1.0) * 100.0


def yardsticks(result: RunResult, statics: list[RunResult]) -> Yardsticks:
    """``statics``: the static runs of the same seed and trace (may include ``result``)."""
    ptl = per_token_latency(result)
    best = min(statics, key=per_token_latency, default=None)
    best_ptl = per_token_latency(best) if best is not None else math.nan
    gain = (1.0 - ptl / best_ptl) * 100.0 if best_ptl > 0 else math.nan
    return Yardsticks(
        policy=result.policy, ptl_s=ptl, bound_pct=bound_regret_pct(result),
        static=best.policy if best is not None else "", static_gain_pct=gain,
    )


@dataclass(frozen=True, slots=True)
class Regret:
    """PTL against the per-step oracle run's (the name is historical: not a bound)."""

    policy: str
    oracle: str
    ptl_s: float
    oracle_ptl_s: float
    absolute_s: float
    percent: float


def _cumulative(result: RunResult) -> tuple[npt.NDArray[np.float64], ...]:
    """(step end times, cumulative request-seconds, cumulative emitted), time-sorted."""
    n = len(result.steps)
    start = np.fromiter((s.time_s for s in result.steps), np.float64, n)
    dt = np.fromiter((s.step_time_s for s in result.steps), np.float64, n)
    batch = np.fromiter((s.batch_size for s in result.steps), np.float64, n)
    emitted = np.fromiter((s.emitted for s in result.steps), np.float64, n)
    order = np.argsort(start, kind="stable")
    end = (start + dt)[order]
    return end, np.cumsum((dt * batch)[order]), np.cumsum(emitted[order])


def per_token_latency(result: RunResult) -> float:
    """Average seconds a running request waits per generated token (NaN if none)."""
    _, wait, emitted = _cumulative(result)
    if emitted.size == 0 or emitted[-1] <= 0:
        return math.nan
    return float(wait[-1] / emitted[-1])


def _check_pair(result: RunResult, oracle: RunResult) -> None:
    if result.trace != oracle.trace:
        raise NightjarInputError(
            f"regret of {result.policy!r} needs an oracle run on the same trace "
            f"(got {result.trace!r} vs {oracle.trace!r})"
        )


def regret(result: RunResult, oracle: RunResult) -> Regret:
    _check_pair(result, oracle)
    ptl = per_token_latency(result)
    ptl_o = per_token_latency(oracle)
    _, _, emitted = _cumulative(result)
    tokens = float(emitted[-1]) if emitted.size else 0.0
    percent = (ptl / ptl_o - 1.0) * 100.0 if ptl_o > 0 else math.nan
    return Regret(
        policy=result.policy,
        oracle=oracle.policy,
        ptl_s=ptl,
        oracle_ptl_s=ptl_o,
        absolute_s=(ptl - ptl_o) * tokens,
        percent=percent,
    )


def regret_curve(result: RunResult, oracle: RunResult, points: int = 20) -> pd.DataFrame:
    """Cumulative regret % over growing prefixes of both runs.

    At ``points`` evenly spaced times up to the earlier of the two runs' last step end,
    each run's PTL is computed over the steps that have ended by then. Times where
    either prefix has emitted nothing are dropped. Columns: ``time_s``, ``ptl_s``,
    ``oracle_ptl_s``, ``regret_pct``.
    """
    _check_pair(result, oracle)
    if points < 1:
        raise NightjarInputError(f"regret curve needs at least 1 point, got {points}")
    columns = ["time_s", "ptl_s", "oracle_ptl_s", "regret_pct"]
    run, orc = _cumulative(result), _cumulative(oracle)
    if run[0].size == 0 or orc[0].size == 0:
        return pd.DataFrame(columns=columns, dtype=float)
    horizon = min(float(run[0].max()), float(orc[0].max()))
    times = np.linspace(horizon / points, horizon, points)
    ptls = []
    for end, wait, emitted in (run, orc):
        # Step ends are not strictly sorted when steps overlap; a running max keeps
        # searchsorted's precondition and only delays a step's credit slightly.
        count = np.searchsorted(np.maximum.accumulate(end), times, side="right")
        has = count > 0
        w = np.where(has, wait[np.maximum(count - 1, 0)], np.nan)
        e = np.where(has, emitted[np.maximum(count - 1, 0)], np.nan)
        ptls.append(np.divide(w, e, out=np.full_like(w, np.nan), where=e > 0))
    ratio = np.divide(ptls[0], ptls[1], out=np.full_like(times, np.nan), where=ptls[1] > 0)
    frame = pd.DataFrame(
        {
            "time_s": times,
            "ptl_s": ptls[0],
            "oracle_ptl_s": ptls[1],
            "regret_pct": (ratio - 1.0) * 100.0,
        }
    )
    return frame.dropna().reset_index(drop=True)
