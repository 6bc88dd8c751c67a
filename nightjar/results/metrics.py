"""Summary statistics of one run, engine-neutral (sim and live produce the same RunResult).

Definitions (docs/outputs.md repeats them for users):

- *duration*: ``RunResult.duration_s`` (trace start to end of run, as the engine
  reports it); if the engine left it unset (<= 0 or NaN), the last finish time.
- *throughput*: output tokens of finished requests / duration; request throughput is
  finished requests / duration.
- *TTFT* = first_token - arrival; *E2E* = finish - arrival; *TPOT* = (finish -
  first_token) / (output_tokens - 1), skipping 1-token outputs. Statistics are over
  finished requests only (an unfinished request has no E2E).
- *goodput*: finished requests meeting both SLO limits, per second of duration;
  *SLO attainment*: those requests as a share of all requests of the run (an
  unfinished request misses its SLO). The limits travel in the summary
  (``slo_ttft_s``, ``slo_tpot_s``) so every table and report can print them.
- *decode steps*: steps with ``batch_size >= 1``. Prefill-only steps carry no gamma
  decision, so gamma statistics ignore them (they would count as spurious switches).
- *mean gamma* is step-weighted (every decode step counts once);
  ``mean_gamma_per_request`` weights each step by its batch size (the gamma an average
  running request saw).
- *switches*: consecutive decode steps whose gamma differs; *toggles*: those where
  speculation turns on or off (gamma 0 <-> > 0). Both as counts (``gamma_switches``,
  ``gamma_toggles``) and per minute of duration.
- *extras* (``RunResult.extra``, engine-specific): a key ending in ``_s`` is seconds;
  every other extra is a count, and comes out of :meth:`Summary.as_dict` as an int.
- *spec time share*: decode time spent in steps with gamma > 0 / all decode time.
- *mean batch size* is time-weighted over decode steps.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from nightjar.core.records import RunResult, with_latencies
from nightjar.core.slo import Slo

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Stat:
    """mean and percentiles of a latency (the ones ``vllm bench serve`` reports by
    default, p50 and p99, and the p90/p95 SLOs are often written in); NaN when there
    are no samples."""

    mean: float
    p50: float
    p90: float
    p95: float
    p99: float

    @staticmethod
    def of(values: FloatArray) -> Stat:
        if values.size == 0:
            return Stat(math.nan, math.nan, math.nan, math.nan, math.nan)
        p50, p90, p95, p99 = np.percentile(values, [50.0, 90.0, 95.0, 99.0])
        return Stat(float(values.mean()), float(p50), float(p90), float(p95), float(p99))


@dataclass(frozen=True)
class Summary:
    policy: str
    engine: str
    trace: str
    requests_total: int
    requests_finished: int
    duration_s: float
    output_tokens: int
    throughput_tok_s: float
    throughput_req_s: float
    ttft_s: Stat
    tpot_s: Stat
    e2e_s: Stat
    slo: Slo
    goodput_req_s: float
    slo_attainment: float  # share of all requests meeting the SLO, 0..1
    preemptions: int
    acceptance: float  # accepted / drafted over all steps; NaN if nothing was drafted
    mean_gamma: float
    mean_gamma_per_request: float
    gamma_switches: int
    gamma_toggles: int
    switches_per_min: float
    toggles_per_min: float
    spec_time_share: float
    mean_batch_size: float
    peak_kv_used_blocks: int
    peak_kv_usage: float  # max over steps of used / capacity
    extra: dict[str, float] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """A flat dict (``ttft_s_p99``, ``slo_tpot_s``, extra keys as they are)."""
        out: dict[str, Any] = {}
        for key, value in asdict(self).items():
            if isinstance(value, dict) and key != "extra":
                out.update({f"{key}_{k}": v for k, v in value.items()})
            elif key != "extra":
                out[key] = value
        for key, value in self.extra.items():
            out[key if key not in out else f"extra_{key}"] = extra_value(key, value)
        return out


def extra_value(key: str, value: float) -> float | int:
    """An engine extra as its kind: seconds (``*_s``) stay float, counts become ints."""
    if key.endswith("_s") or not math.isfinite(value) or value != int(value):
        return value
    return int(value)


def request_latencies(requests: pd.DataFrame) -> pd.DataFrame:
    """Add ``ttft_s``, ``tpot_s`` and ``e2e_s`` columns (NaN where undefined)."""
    return with_latencies(requests)


def run_duration(result: RunResult, finish: FloatArray) -> float:
    if result.duration_s > 0 and math.isfinite(result.duration_s):
        return float(result.duration_s)
    finite = finish[np.isfinite(finish)]
    return float(finite.max()) if finite.size else 0.0


def _per_s(count: float, seconds: float) -> float:
    return count / seconds if seconds > 0 else math.nan


def summarize(result: RunResult, slo: Slo | None = None) -> Summary:
    slo = slo or Slo()
    req = result.requests_frame()
    finished = req[np.isfinite(req["finish_s"].to_numpy(dtype=float))]
    duration = run_duration(result, req["finish_s"].to_numpy(dtype=float))
    out_tokens = int(finished["output_tokens"].sum())
    tpot = finished["tpot_s"].to_numpy(dtype=float)
    ttft = finished["ttft_s"].to_numpy(dtype=float)
    # A 1-token output has no TPOT, so it meets the TPOT limit vacuously.
    good = (ttft <= slo.ttft_s) & (np.isnan(tpot) | (tpot <= slo.tpot_s))
    steps = _step_stats(result)
    minutes = duration / 60.0
    return Summary(
        policy=result.policy,
        engine=result.engine,
        trace=result.trace,
        requests_total=len(req),
        requests_finished=len(finished),
        duration_s=duration,
        output_tokens=out_tokens,
        throughput_tok_s=_per_s(out_tokens, duration),
        throughput_req_s=_per_s(len(finished), duration),
        ttft_s=Stat.of(ttft[np.isfinite(ttft)]),
        tpot_s=Stat.of(tpot[np.isfinite(tpot)]),
        e2e_s=Stat.of(finished["e2e_s"].to_numpy(dtype=float)),
        slo=slo,
        goodput_req_s=_per_s(int(good.sum()), duration),
        slo_attainment=_ratio(float(good.sum()), float(len(req))),
        preemptions=int(req["preemptions"].sum()),
        acceptance=steps["acceptance"],
        mean_gamma=steps["mean_gamma"],
        mean_gamma_per_request=steps["mean_gamma_per_request"],
        gamma_switches=int(steps["switches"]),
        gamma_toggles=int(steps["toggles"]),
        switches_per_min=_per_s(steps["switches"], minutes),
        toggles_per_min=_per_s(steps["toggles"], minutes),
        spec_time_share=steps["spec_time_share"],
        mean_batch_size=steps["mean_batch_size"],
        peak_kv_used_blocks=int(steps["peak_kv_used"]),
        peak_kv_usage=steps["peak_kv_usage"],
        extra=dict(result.extra),
    )


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def _step_stats(result: RunResult) -> dict[str, float]:
    # Arrays straight from the records: cheaper than a DataFrame for 150k steps.
    steps = result.steps
    gamma = np.fromiter((s.gamma for s in steps), dtype=np.int64, count=len(steps))
    batch = np.fromiter((s.batch_size for s in steps), dtype=np.int64, count=len(steps))
    dt = np.fromiter((s.step_time_s for s in steps), dtype=np.float64, count=len(steps))
    used = np.fromiter((s.kv_used_blocks for s in steps), dtype=np.int64, count=len(steps))
    total = np.fromiter((s.kv_total_blocks for s in steps), dtype=np.int64, count=len(steps))
    drafted = sum(s.drafted for s in steps)
    accepted = sum(s.accepted for s in steps)

    decode = batch >= 1
    g, b, t = gamma[decode], batch[decode], dt[decode]
    on = g > 0
    usage = np.divide(used, total, out=np.zeros(len(steps)), where=total > 0)
    return {
        "acceptance": _ratio(accepted, drafted),
        "mean_gamma": float(g.mean()) if g.size else math.nan,
        "mean_gamma_per_request": _ratio(float((g * b).sum()), float(b.sum())),
        "switches": float(np.count_nonzero(np.diff(g))),
        "toggles": float(np.count_nonzero(np.diff(on.astype(np.int8)))),
        "spec_time_share": _ratio(float(t[on].sum()), float(t.sum())),
        "mean_batch_size": _ratio(float((b * t).sum()), float(t.sum())),
        "peak_kv_used": float(used.max()) if used.size else 0.0,
        "peak_kv_usage": float(usage.max()) if usage.size else math.nan,
    }
