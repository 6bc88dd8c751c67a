"""Regret against the whole system: the best static way to serve the same load.

The per-step bound (:mod:`nightjar.sim.yardstick`) holds a run's own batches and KV
pool fixed, so it cannot see that another choice would have held more requests: on a
memory-bound load, a server with no draft loaded can beat every gamma schedule of a
server that keeps one. A user compares what they could have deployed instead. So a
run's *alternatives* are the static runs of the same seed and trace in its set:
``nospec`` (served with no draft loaded), ``fixed:G`` and ``schedule:...``, each under
the memory setting it ran with (``SPEC@offload=off``/``on`` runs it the other way,
:mod:`nightjar.core.variant`). Per user metric the best alternative is the one with
the best value on that seed, and the run's regret is how much worse it is, in %:
``(x / best - 1) * 100`` where lower is better, ``(1 - x / best) * 100`` where higher
is. Negative: the run beat every alternative. Over seeds the regrets are paired (each
seed's run against that seed's best) and averaged with a 95% interval
(:mod:`nightjar.results.multiseed`).

Which alternatives a complete comparison needs (:func:`expected_alternatives`):
``nospec``, ``fixed:1..gamma_max`` under the run's memory setting, and where the
drafter has weights to move, each ``fixed:G`` with elastic memory the other way. The
best batch-bucketed schedule is not searched here (``nightjar schedule`` finds one;
add it with ``--policy schedule:...``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from nightjar.core.variant import split_variant, with_offload
from nightjar.results.metrics import Summary

STATIC_POLICIES = ("nospec", "fixed", "schedule")

# (key, label, higher is better)
USER_METRICS: tuple[tuple[str, str, bool], ...] = (
    ("e2e_s_mean", "mean E2E", False),
    ("throughput_tok_s", "throughput", True),
    ("tpot_s_mean", "mean TPOT", False),
    ("goodput_req_s", "goodput", True),
)
HIGHER_IS_BETTER = {key: up for key, _, up in USER_METRICS}


def is_static(spec: str) -> bool:
    """Whether a spec's choice depends on nothing but the batch size (variants too)."""
    return split_variant(spec)[0].partition(":")[0] in STATIC_POLICIES


def metric_value(summary: Summary, key: str) -> float:
    if key == "e2e_s_mean":
        return summary.e2e_s.mean
    if key == "tpot_s_mean":
        return summary.tpot_s.mean
    return float(getattr(summary, key))


@dataclass(frozen=True, slots=True)
class AltRegret:
    """One run against the best alternative of its seed on one metric."""

    metric: str
    best: str  # the winning alternative's spec ("" where none ran)
    best_value: float
    value: float
    pct: float  # > 0: the run is behind the best alternative; NaN: n/a


def regret_pct(value: float, best: float, higher_is_better: bool) -> float:
    if not (math.isfinite(value) and math.isfinite(best)) or best == 0:
        return math.nan
    return (1.0 - value / best) * 100.0 if higher_is_better else (value / best - 1.0) * 100.0


def against_alternatives(summary: Summary, alternatives: Sequence[Summary]) -> dict[str, AltRegret]:
    """Per user metric, ``summary`` against the best of ``alternatives`` (same seed and
    trace; may include ``summary`` itself, whose regret is then >= 0)."""
    return {key: against(key, metric_value(summary, key),
                         [(metric_value(a, key), a.policy) for a in alternatives])
            for key, _, _ in USER_METRICS}


def against(key: str, value: float, scored: Sequence[tuple[float, str]]) -> AltRegret:
    """``value`` of metric ``key`` against the best of ``scored`` (value, name) pairs."""
    up = HIGHER_IS_BETTER[key]
    finite = [(v, name) for v, name in scored if math.isfinite(v)]
    if not finite:
        return AltRegret(key, "", math.nan, value, math.nan)
    best_value, best = max(finite) if up else min(finite)
    return AltRegret(key, best, best_value, value, regret_pct(value, best_value, up))


def expected_alternatives(gamma_max: int, offload_on: bool, movable: bool) -> list[str]:
    """The static runs a complete full-system comparison holds (see the module doc)."""
    fixed = [f"fixed:{g}" for g in range(1, gamma_max + 1)]
    other = "off" if offload_on else "on"
    return ["nospec", *fixed, *([with_offload(s, other) for s in fixed] if movable else [])]


def missing_alternatives(ran: Sequence[str], expected: Sequence[str]) -> list[str]:
    """What of ``expected`` the set did not run (a plain spec counts as its own variant
    under the run's setting)."""
    have = set(ran)
    return [spec for spec in expected if spec not in have]


def add_to_rows(rows: Sequence[dict[str, object]], axes: Sequence[str]) -> list[dict[str, object]]:
    """A sweep's rows (one policy per cell) with ``alt_<metric>_pct`` and
    ``alt_<metric>_best``: each cell against the best static cell of its group, the
    cells that share every axis in ``axes`` but ``policy`` and ``offload`` (so a group
    holds each policy with elastic memory on and off where the grid has both). A
    group whose only static cell is the row itself gives that row none."""
    keys = [a for a in axes if a not in ("policy", "offload")]
    groups: dict[tuple[object, ...], list[int]] = {}
    for i, row in enumerate(rows):
        groups.setdefault(tuple(str(row.get(k)) for k in keys), []).append(i)
    out = [dict(row) for row in rows]
    for members in groups.values():
        statics = [i for i in members if is_static(str(rows[i]["policy"]))]
        for i in members:
            others = [j for j in statics if j != i]
            if not others:
                continue
            pool = statics if i in statics else others
            for key, _, _ in USER_METRICS:
                alt = against(key, _num(rows[i].get(key)),
                              [(_num(rows[j].get(key)), _cell_label(rows[j])) for j in pool])
                if alt.best:
                    out[i][f"alt_{key}_pct"] = alt.pct
                    out[i][f"alt_{key}_best"] = alt.best
    return out


def _num(value: object) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def _cell_label(row: dict[str, object]) -> str:
    return f"{row['policy']} (offload {row.get('offload')})"
