"""Results over several seeds: per-seed rows, 95% intervals per policy, and verdicts.

Each seed is one independent repetition of the experiment (the arrivals of a
generative trace, the per-request acceptance rates and the sampled accepts all
change with it), so the t interval of :mod:`nightjar.results.stats` applies. Every
policy of a seed sees that seed's arrivals and acceptance draws, so two policies are
compared by their per-seed differences (:mod:`nightjar.results.paired`): a policy
"beats" another on a metric only where the paired interval excludes zero. The paired
interval is the right one and much the tighter: what a seed shares (a burstier draw,
a luckier acceptance sample) cancels in the difference.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from nightjar.results.alternatives import AltRegret
from nightjar.results.metrics import Summary
from nightjar.results.paired import PairedDiff, paired_diff
from nightjar.results.regret import Regret, Yardsticks
from nightjar.results.stats import Interval, mean_interval


@dataclass(frozen=True, slots=True)
class Metric:
    key: str
    label: str
    get: Callable[[Summary, Regret | None, Yardsticks | None], float]
    higher_is_better: bool
    fmt: str = "{:.2f}"


def _nan_or(value: float | None) -> float:
    return math.nan if value is None else value


METRICS: tuple[Metric, ...] = (
    Metric("throughput_tok_s", "tok/s", lambda s, r, y: s.throughput_tok_s, True, "{:.1f}"),
    Metric("e2e_s_mean", "E2E s", lambda s, r, y: s.e2e_s.mean, False),
    Metric("ttft_s_mean", "TTFT s", lambda s, r, y: s.ttft_s.mean, False, "{:.3f}"),
    Metric("tpot_ms_mean", "TPOT ms", lambda s, r, y: s.tpot_s.mean * 1e3, False, "{:.1f}"),
    Metric("preemptions", "preempts", lambda s, r, y: s.preemptions, False, "{:.0f}"),
    Metric("spec_time_share", "spec %", lambda s, r, y: s.spec_time_share * 100.0, False,
           "{:.1f}"),
    # The yardsticks (nightjar.results.regret): each label names what it is against.
    Metric("regret_bound_pct", "bound gap %",
           lambda s, r, y: _nan_or(y.bound_pct if y else None), False, "{:.2f}"),
    Metric("gain_static_pct", "gain vs static %",
           lambda s, r, y: _nan_or(y.static_gain_pct if y else None), True, "{:.2f}"),
    Metric("step_oracle_pct", "vs step-oracle %",
           lambda s, r, y: _nan_or(r.percent if r else None), False, "{:.2f}"),
)
# The full-system yardstick (nightjar.results.alternatives): each seed's run against
# that seed's best static alternative, so the interval over seeds is a paired one.
ALT_METRICS: tuple[tuple[str, str, str], ...] = (
    ("alt_e2e_pct", "E2E vs best alt %", "e2e_s_mean"),
    ("alt_tok_pct", "tok/s vs best alt %", "throughput_tok_s"),
)
_BY_KEY = {m.key: m for m in METRICS}
_KEYS = (*(m.key for m in METRICS), *(k for k, _, _ in ALT_METRICS))

Row = dict[str, float | str]
Aggregate = dict[str, dict[str, Interval]]  # policy -> metric key -> interval


def seed_rows(
    seed: int,
    summaries: Sequence[Summary],
    regrets: dict[str, Regret] | None,
    yardsticks: dict[str, Yardsticks] | None = None,
    alternatives: dict[str, dict[str, AltRegret]] | None = None,
) -> list[Row]:
    """One row per policy for this seed: ``seed``, ``policy``, every metric, the
    regrets against the best static alternatives, and the static policy the gain is
    against (``static_yardstick``)."""
    rows: list[Row] = []
    for s in summaries:
        r = regrets.get(s.policy) if regrets else None
        y = yardsticks.get(s.policy) if yardsticks else None
        alts = (alternatives or {}).get(s.policy, {})
        row: Row = {"seed": seed, "policy": s.policy}
        row.update({m.key: m.get(s, r, y) for m in METRICS})
        for key, _, metric in ALT_METRICS:
            row[key] = alts[metric].pct if metric in alts else math.nan
        row["static_yardstick"] = y.static if y is not None else ""
        rows.append(row)
    return rows


def aggregate(rows: Sequence[Row]) -> Aggregate:
    """Per policy (in first-seen order) and metric, the 95% interval over seeds."""
    out: Aggregate = {}
    for policy in dict.fromkeys(str(r["policy"]) for r in rows):
        mine = [r for r in rows if r["policy"] == policy]
        out[policy] = {k: mean_interval([float(r.get(k, math.nan)) for r in mine])
                       for k in _KEYS}
    return out


def _values(rows: Sequence[Row], key: str) -> dict[str, dict[int, dict[str, float]]]:
    out: dict[str, dict[int, dict[str, float]]] = {}
    for r in rows:
        out.setdefault(str(r["policy"]), {})[int(r["seed"])] = {key: float(r.get(key, math.nan))}
    return out


def paired(rows: Sequence[Row], a: str, b: str, key: str) -> PairedDiff:
    """``a - b`` on ``key``, paired per seed."""
    return paired_diff(_values(rows, key), a, b, key)


def _wins(d: PairedDiff) -> bool:
    """Whether ``d.a`` is better than ``d.b``: the paired interval excludes zero."""
    return d.separated and (d.diff.mean > 0) == _BY_KEY[d.metric].higher_is_better


def beats(rows: Sequence[Row], a: str, b: str, key: str) -> bool:
    """Whether ``a`` is better than ``b`` on ``key``: the paired interval excludes zero."""
    return _wins(paired(rows, a, b, key))


def verdicts(rows: Sequence[Row], agg: Aggregate, key: str) -> list[str]:
    """For the best policy by mean on ``key``: whom it beats (with the paired difference)
    and with whom the paired interval includes zero."""
    metric = _BY_KEY[key]
    present = [p for p in agg if math.isfinite(agg[p][key].mean)]
    if len(present) < 2:
        return []
    sign = 1.0 if metric.higher_is_better else -1.0
    best = max(present, key=lambda p: sign * agg[p][key].mean)
    values = _values(rows, key)
    won, tied = [], []
    for p in present:
        if p == best:
            continue
        d = paired_diff(values, best, p, key)
        if _wins(d):
            won.append(f"{p} ({d.diff.format(metric.fmt).replace(' ± ', '±')})")
        else:
            tied.append(p)
    line = f"{metric.label}: best mean {best}"
    if won:
        line += f"; beats, paired per seed: {', '.join(won)}"
    if tied:
        line += f"; paired interval includes zero with {', '.join(tied)} (no claim)"
    return [line]


def write_seed_files(
    rows: Sequence[Row], agg: Aggregate, out_dir: Path, fmt: str = "csv"
) -> list[Path]:
    """``seeds.csv`` (one row per seed and policy), ``intervals.csv`` and
    ``intervals.json``; with ``fmt="parquet"`` the tables as ``.parquet``."""
    import pandas as pd

    from nightjar.results.write import write_frame

    out_dir.mkdir(parents=True, exist_ok=True)
    columns = ["seed", "policy", *_KEYS, "static_yardstick"]
    # Then the runs' provenance (nightjar.results.provenance), in the order written.
    columns += [k for k in dict.fromkeys(k for r in rows for k in r) if k not in columns]
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
