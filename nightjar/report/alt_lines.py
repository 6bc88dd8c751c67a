"""The full-system yardstick in words, for under the terminal table.

One line per metric names the best static alternative of the run set and its value;
one line per other policy gives its regret against that metric's best alternative
(:mod:`nightjar.results.alternatives`), paired per seed with a 95% interval where the
set holds several seeds. A line says which alternatives were not run, and the flag
that runs them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from nightjar.results.alternatives import USER_METRICS, AltRegret, is_static
from nightjar.results.run_set import ResultSet
from nightjar.results.stats import mean_interval

ALTERNATIVES_FLAG = "--alternatives"


def _unit(key: str, value: float) -> str:
    if key == "e2e_s_mean":
        return f"{value:.3g} s"
    if key == "tpot_s_mean":
        return f"{value * 1e3:.3g} ms"
    if key == "throughput_tok_s":
        return f"{value:.0f} tok/s"
    return f"{value:.3g} req/s"


@dataclass(frozen=True, slots=True)
class Entry:
    """One run's full-system yardstick: all that the lines need of it."""

    policy: str
    group: int  # what pairs it: the seed, or the live benchmark's round
    alternatives: dict[str, AltRegret]


def entries(rs: ResultSet, group: int | None = None) -> list[Entry]:
    """What :func:`alternative_lines` keeps of a run set (not its runs' records);
    ``group`` pairs its runs (default: each run's seed)."""
    return [Entry(r.policy, r.seed if group is None else group, r.alternatives)
            for r in rs.runs if r.alternatives]


def alternative_lines(runs: Sequence[Entry], missing: Sequence[str] = ()) -> list[str]:
    """What the alternatives say about every adaptive run (of one seed or several)."""
    if not runs:
        return []
    lines = ["vs the best static alternative of the same seed or round (nospec serves with"
             " no draft loaded; regret > 0: behind it; paired, mean ± 95% half-width):"]
    for key, label, _ in USER_METRICS:
        lines.append(f"  {label}: " + _best(runs, key))
    for policy in dict.fromkeys(r.policy for r in runs if not is_static(r.policy)):
        mine = [r for r in runs if r.policy == policy]
        parts = []
        for key, label, _ in USER_METRICS:
            iv = mean_interval([r.alternatives[key].pct for r in mine])
            if not math.isfinite(iv.mean):
                continue
            text = iv.format("{:+.2f}") + "%"
            if iv.n > 1:
                text += (" (behind)" if iv.lo > 0 else " (ahead)" if iv.hi < 0 else " (tie)")
            parts.append(f"{label} {text}")
        lines.append(f"  {policy}: " + "; ".join(parts))
    if missing:
        lines.append(f"  not run: {', '.join(missing)} ({ALTERNATIVES_FLAG} adds them)")
    return lines


def _best(runs: Sequence[Entry], key: str) -> str:
    """The best alternative of each seed, and how often each won."""
    wins: dict[str, list[float]] = {}
    seen: set[int] = set()
    for run in runs:
        alt = run.alternatives[key]
        if not alt.best or run.group in seen:
            continue
        seen.add(run.group)
        wins.setdefault(alt.best, []).append(alt.best_value)
    if not wins:
        return "-"
    ranked = sorted(wins.items(), key=lambda kv: -len(kv[1]))
    return "; ".join(
        f"{name} ({_unit(key, sum(v) / len(v))}"
        + (f", best in {len(v)} of {len(seen)})" if len(seen) > 1 else ")")
        for name, v in ranked
    )
