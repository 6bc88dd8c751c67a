"""Results over several seeds: per-seed rows, 95% intervals per policy, and verdicts.

Each seed is one independent repetition of the experiment (the arrivals of a
generative trace, the per-request acceptance rates and the sampled accepts all
change with it), so the t interval of :mod:`nightjar.results.stats` applies. A policy
"beats" another on a metric only where their intervals do not overlap.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nightjar.results.metrics import Summary
from nightjar.results.regret import Regret
from nightjar.results.stats import Interval, compare, mean_interval


@dataclass(frozen=True, slots=True)
class Metric:
    key: str
    label: str
    get: Callable[[Summary, Regret | None], float]
    higher_is_better: bool
    fmt: str = "{:.2f}"


METRICS: tuple[Metric, ...] = (
    Metric("throughput_tok_s", "tok/s", lambda s, r: s.throughput_tok_s, True, "{:.1f}"),
    Metric("e2e_s_mean", "E2E s", lambda s, r: s.e2e_s.mean, False),
    Metric("ttft_s_mean", "TTFT s", lambda s, r: s.ttft_s.mean, False, "{:.3f}"),
    Metric("tpot_ms_mean", "TPOT ms", lambda s, r: s.tpot_s.mean * 1e3, False, "{:.1f}"),
    Metric("preemptions", "preempts", lambda s, r: s.preemptions, False, "{:.0f}"),
    Metric(
        "regret_pct", "regret %",
        lambda s, r: r.percent if r is not None else math.nan, False, "{:.2f}",
    ),
)
_BY_KEY = {m.key: m for m in METRICS}

Row = dict[str, float | str]
Aggregate = dict[str, dict[str, Interval]]  # policy -> metric key -> interval


def seed_rows(
    seed: int, summaries: Sequence[Summary], regrets: dict[str, Regret] | None
) -> list[Row]:
    """One row per policy for this seed: ``seed``, ``policy`` and every metric."""
    rows: list[Row] = []
    for s in summaries:
        r = regrets.get(s.policy) if regrets else None
        row: Row = {"seed": seed, "policy": s.policy}
        row.update({m.key: m.get(s, r) for m in METRICS})
        rows.append(row)
    return rows


def aggregate(rows: Sequence[Row]) -> Aggregate:
    """Per policy (in first-seen order) and metric, the 95% interval over seeds."""
    out: Aggregate = {}
    for policy in dict.fromkeys(str(r["policy"]) for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        out[policy] = {m.key: mean_interval([float(r[m.key]) for r in mine]) for m in METRICS}
    return out


def beats(agg: Aggregate, a: str, b: str, key: str) -> bool:
    """Whether ``a`` is better than ``b`` on ``key`` with separated intervals."""
    rel = compare(agg[a][key], agg[b][key])
    return rel == (">" if _BY_KEY[key].higher_is_better else "<")


def verdicts(agg: Aggregate, key: str) -> list[str]:
    """For the best policy by mean on ``key``: whom it beats, and whom it only ties."""
    metric = _BY_KEY[key]
    present = [p for p in agg if math.isfinite(agg[p][key].mean)]
    if len(present) < 2:
        return []
    sign = 1.0 if metric.higher_is_better else -1.0
    best = max(present, key=lambda p: sign * agg[p][key].mean)
    won = [p for p in present if p != best and beats(agg, best, p, key)]
    tied = [p for p in present if p != best and p not in won]
    line = f"{metric.label}: best mean {best}"
    if won:
        line += f"; beats {', '.join(won)}"
    if tied:
        line += f"; intervals overlap with {', '.join(tied)} (no claim)"
    return [line]


def write_seed_files(
    rows: Sequence[Row], agg: Aggregate, out_dir: Path, fmt: str = "csv"
) -> list[Path]:
    """``seeds.csv`` (one row per seed and policy), ``intervals.csv`` and
    ``intervals.json``; with ``fmt="parquet"`` the tables as ``.parquet``."""
    import pandas as pd

    from nightjar.results.write import write_frame

    out_dir.mkdir(parents=True, exist_ok=True)
    columns = ["seed", "policy", *[m.key for m in METRICS]]
    seeds = pd.DataFrame(list(rows), columns=columns).astype({"seed": "int64"})
    flat = [
        {"policy": p, "metric": k, "mean": iv.mean, "lo": iv.lo, "hi": iv.hi, "n": iv.n}
        for p, ivs in agg.items()
        for k, iv in ivs.items()
    ]
    intervals = pd.DataFrame(flat, columns=["policy", "metric", "mean", "lo", "hi", "n"])
    paths = [write_frame(seeds, out_dir / "seeds", fmt),
             write_frame(intervals.astype({"n": "int64"}), out_dir / "intervals", fmt)]
    as_json = out_dir / "intervals.json"
    as_json.write_text(json.dumps(flat, indent=1, allow_nan=True) + "\n")
    return [*paths, as_json]
