"""The time base a live run is priced in, and the step replay by kind.

The machine's speed drifts between a profile and a benchmark taken hours apart; a
benchmark's noise twins (one policy run twice a round) measure each round's speed on
the profile's scale, so ``nightjar validate --time-base round`` prices every run of a
round at its twins' factor (:func:`time_bases`) instead of the profile's own. The speed
also drifts between the runs of one round (each policy's by -2 to +6% between rounds of
the sixth agreement measurement), and the queue of an overloaded trace multiplies a
price error by about 3 (reports/simulator/fit-from-runs/sensitivity.md):
``--time-base run`` prices each run at its own factor (:func:`run_time_bases`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from nightjar.errors import NightjarInputError

if TYPE_CHECKING:
    from nightjar.core.records import RunResult
    from nightjar.profile.profile import Profile
    from nightjar.results.bench import RoundRun


def time_bases(runs: Sequence[RoundRun], profile: Profile, sync: bool
                ) -> dict[tuple[int, str], float]:
    """(round, label) -> the factor the run is priced at: the mean time base of its
    round's reference runs (the noise twins), the other twin's for a twin."""
    from nightjar.fidelity.compare import priced_steps, time_base
    from nightjar.results.bench import labels_of, noise_pair

    pair = noise_pair(labels_of(runs))
    if pair is None:
        raise NightjarInputError("--time-base round needs the benchmark's noise twin (one "
                                 "policy run twice a round, as `nightjar bench live` does)")
    own = {(r.round, r.label): time_base(priced_steps(r.result, profile, sync))
           for r in runs if r.label in pair}
    out = {}
    for r in runs:
        refs = [own.get((r.round, x), math.nan) for x in pair if x != r.label]
        refs = [f for f in refs if math.isfinite(f) and f > 0]
        if not refs:
            raise NightjarInputError(f"--time-base round: round {r.round}'s reference runs "
                                     f"({', '.join(pair)}) ran no pure decode step")
        out[(r.round, r.label)] = sum(refs) / len(refs)
    return out


def run_time_bases(runs: Sequence[RoundRun], profile: Profile, sync: bool
                   ) -> dict[tuple[int, str], float]:
    """(round, label) -> the run's own time base: the machine's speed over the run's own
    pure decode steps. A run then misses only by the profile's shape (how one step is
    priced against another) and by the scheduling; but where a policy's steps gather in
    cells the profile prices wrong, the factor takes up part of that error too."""
    return {(r.round, r.label): run_time_base(r.result, profile, sync) for r in runs}


def run_time_base(run: RunResult, profile: Profile, sync: bool) -> float:
    """One run's own time base (:func:`nightjar.fidelity.compare.time_base`), checked."""
    from nightjar.fidelity.compare import priced_steps, time_base

    factor = time_base(priced_steps(run, profile, sync))
    if not (math.isfinite(factor) and factor > 0):
        raise NightjarInputError(f"--time-base run: the {run.policy} run ran no pure decode "
                                 "step on the profile's grid to take its speed from")
    return factor


def run_base_line(bases: dict[tuple[int, str], float]) -> str:
    """Per round, the factor each run is priced at."""
    rounds = sorted({r for r, _ in bases})
    parts = [f"round {r} " + ", ".join(f"{label} x{f:.3f}" for (q, label), f in bases.items()
                                       if q == r) for r in rounds]
    return "time base (each run priced on the profile times its own): " + "; ".join(parts)


def time_base_line(bases: dict[tuple[int, str], float], runs: Sequence[RoundRun]) -> str:
    """Per round: the factor its runs are priced at, and each twin's own time base (the
    factor the other twin is priced at)."""
    from nightjar.results.bench import labels_of, noise_pair

    a, b = noise_pair(labels_of(runs)) or ("", "")

    def own(r: int, twin: str, other: str) -> str:
        # A round may lack a twin (a run left out): its own base is then unknown.
        f = bases.get((r, other))
        return f"{twin} x{f:.3f}" if f is not None and (r, twin) in bases else f"{twin} -"

    parts = []
    for r in sorted({r for r, _ in bases}):
        # Every other run of the round is priced at the twins' mean.
        round_bases = [f for (q, label), f in bases.items() if q == r]
        others = [f for (q, label), f in bases.items() if q == r and label not in (a, b)]
        mean = others[0] if others else sum(round_bases) / len(round_bases)
        parts.append(f"round {r} x{mean:.3f} ({own(r, a, b)}, {own(r, b, a)})")
    return "time base (each round's runs priced on the profile times it): " + "; ".join(parts)


def replay_by_kind(frame: pd.DataFrame) -> pd.DataFrame:
    """Per policy and step kind: steps, live and priced seconds over every round, and the
    error of each round's total, as a mean with its 95% interval."""
    from nightjar.results.stats import mean_interval

    rows = []
    for (policy, kind), g in frame.groupby(["policy", "kind"], sort=False):
        iv = mean_interval(g["total_error_pct"].tolist())
        live, priced = float(g["live_s"].sum()), float(g["priced_s"].sum())
        rows.append({"policy": policy, "kind": kind, "steps": int(g["steps"].sum()),
                     "live_s": live, "priced_s": priced,
                     "error_pct": 100.0 * (priced / live - 1.0) if live else math.nan,
                     "per_round": iv.format("{:+.1f}"),
                     "median_step_error_pct": float(g["median_error_pct"].median()),
                     "at_edge": int(g["at_edge"].sum())})
    return pd.DataFrame(rows)
