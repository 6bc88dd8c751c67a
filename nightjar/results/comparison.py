"""Two or more run sets side by side: per policy, each set against the first, paired by seed.

"Offload on against off" or "this commit against the last" is the same policies run on
the same seeds under two configurations. A seed fixes the arrivals and the acceptance
draws, so the difference of a metric within a seed cancels what the seed shared, and
its mean over the seeds both sets ran carries a Student-t 95% interval
(:mod:`nightjar.results.paired`). A difference is claimed only where that interval
excludes zero; one shared seed gives the difference with no interval.

Pure data: :func:`compare_rows` returns plain rows; ``nightjar compare`` prints and
writes them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nightjar.core.records import RunResult
from nightjar.core.slo import Slo
from nightjar.results.metrics import summarize
from nightjar.results.paired import paired_diff
from nightjar.results.provenance import differing

# (summary column, label, larger is better)
METRICS: tuple[tuple[str, str, bool], ...] = (
    ("throughput_tok_s", "tok/s", True),
    ("goodput_req_s", "goodput/s", True),
    ("e2e_s_mean", "E2E s", False),
    ("ttft_s_mean", "TTFT s", False),
    ("ttft_s_p99", "TTFT p99 s", False),
    ("tpot_s_mean", "TPOT s", False),
    ("tpot_s_p99", "TPOT p99 s", False),
)


@dataclass(frozen=True, slots=True)
class RunSet:
    """One argument of a comparison: a label and its runs (any seeds, any policies)."""

    label: str
    runs: Sequence[RunResult]


def _values(sets: Sequence[RunSet], slo: Slo | None
            ) -> dict[str, dict[str, dict[int, dict[str, Any]]]]:
    """label -> policy -> seed -> flat summary (a policy's first run per seed)."""
    out: dict[str, dict[str, dict[int, dict[str, Any]]]] = {}
    for s in sets:
        mine = out.setdefault(s.label, {})
        for run in s.runs:
            seeds = mine.setdefault(run.policy, {})
            if run.seed not in seeds:
                seeds[run.seed] = summarize(run, slo).as_dict()
    return out


def compare_rows(sets: Sequence[RunSet], slo: Slo | None = None) -> list[dict[str, Any]]:
    """One row per (policy both sides ran, later set, metric): the baseline's and the
    other's means over their shared seeds, the paired difference ``other - baseline``
    with its 95% interval, the difference in % of the baseline, and the verdict."""
    if len(sets) < 2:
        raise ValueError("a comparison needs two run sets at least")
    by = _values(sets, slo)
    base = sets[0].label
    rows: list[dict[str, Any]] = []
    for other in sets[1:]:
        for policy in [p for p in by[base] if p in by[other.label]]:
            a, b = by[base][policy], by[other.label][policy]
            seeds = sorted(set(a) & set(b))
            for key, label, higher in METRICS:
                values = {
                    base: {s: {key: float(a[s][key])} for s in seeds},
                    other.label: {s: {key: float(b[s][key])} for s in seeds},
                }
                d = paired_diff(values, other.label, base, key)
                n = d.diff.n
                rows.append({
                    "policy": policy, "baseline": base, "other": other.label, "metric": key,
                    "label": label, "seeds": n,
                    "baseline_mean": d.b_mean,
                    "other_mean": d.b_mean + d.diff.mean if n else math.nan,
                    "diff": d.diff.mean, "diff_lo": d.diff.lo, "diff_hi": d.diff.hi,
                    "diff_pct": d.rel_pct,
                    "verdict": _verdict(d.separated, d.diff.mean, n, higher, other.label, base),
                })
    return rows


def _verdict(separated: bool, diff: float, n: int, higher: bool, other: str, base: str) -> str:
    if n == 0:
        return "no shared seed"
    if n == 1:
        return "one seed: no interval"
    if not separated:
        return "no claim"
    return f"{other} better" if (diff > 0) == higher else f"{base} better"


def setting_changes(sets: Sequence[RunSet]) -> list[str]:
    """Lines naming each provenance setting in which a later set differs from the first
    (read from each set's first run): what the comparison compares."""
    if not sets or not sets[0].runs:
        return []
    first: Mapping[str, Any] = sets[0].runs[0].provenance
    lines = []
    for s in sets[1:]:
        if not s.runs:
            continue
        changes = differing(first, s.runs[0].provenance)
        if changes:
            said = ", ".join(f"{k} {_show(a)} -> {_show(b)}" for k, (a, b) in changes.items())
            lines.append(f"{s.label} against {sets[0].label}: {said}")
        elif first and s.runs[0].provenance:
            lines.append(f"{s.label} against {sets[0].label}: the same recorded settings")
    return lines


def _show(value: Any) -> str:
    return "(not recorded)" if value is None else str(value)
