"""The agreement check, judged on the pairs the engine separates.

Over a live benchmark's rounds (``nightjar bench live``) every run is replayed in the
simulator (its trace, with the run's measured acceptance) and both engines' metrics
are compared pair by pair:

- **pairs**: for every pair of policies and metric, the live paired per-round
  difference (:mod:`nightjar.results.paired`); where its 95% interval excludes zero
  the engine *separated* the pair, and the simulator agrees when its own mean
  difference over the same rounds has the same sign. A pair the engine did not
  separate is ``unresolved``: no order to hold against the simulator, never a miss.
- **errors**: per policy and metric, the simulator's error ``sim / live - 1`` per
  round, its mean and 95% interval over the rounds.
- **noise floor**: the live difference between the policy run twice per round, what
  "no difference" looks like on that machine.

Rounds holding a run the machine disturbed (``loaded``) are left out, as the
benchmark's own tables do (all rounds where fewer than two are quiet).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from nightjar.results.bench import NOISE_SUFFIX, RoundRun, labels_of, noise_pair, values_of
from nightjar.results.paired import METRIC_NAMES, METRICS, PairedDiff, Values, paired_diff
from nightjar.results.stats import mean_interval

JUDGED = tuple(k for k, _, _ in METRICS)


@dataclass(frozen=True)
class PairAgreement:
    live: PairedDiff
    sim: PairedDiff

    @property
    def status(self) -> str:
        """``same``, ``MISS`` (the simulator orders a separated pair the other way) or
        ``unresolved`` (the engine did not separate it)."""
        if not self.live.separated:
            return "unresolved"
        same = (self.sim.diff.mean > 0) == (self.live.diff.mean > 0) and self.sim.diff.mean != 0
        return "same" if same else "MISS"


@dataclass(frozen=True)
class BenchAgreement:
    pairs: list[PairAgreement]
    errors: pd.DataFrame  # label x metric: live, sim, error % with its interval
    noise: pd.DataFrame  # metric: the noise pair's live difference
    clean_rounds: int
    rounds: int

    def by_metric(self, metric: str) -> list[PairAgreement]:
        return [p for p in self.pairs if p.live.metric == metric]

    def verdict(self, metric: str) -> str:
        ps = self.by_metric(metric)
        sep = [p for p in ps if p.status != "unresolved"]
        miss = [p for p in sep if p.status == "MISS"]
        return (f"{METRIC_NAMES[metric]}: {len(sep)} of {len(ps)} pairs separated live; the "
                f"simulator orders {len(sep) - len(miss)} of {len(sep)} the same way"
                + (f" (misses: {', '.join(f'{p.live.a} vs {p.live.b}' for p in miss)})"
                   if miss else ""))

    def pairs_frame(self) -> pd.DataFrame:
        rows = []
        for p in self.pairs:
            lv, sv = p.live, p.sim
            rows.append({"metric": lv.metric, "a": lv.a, "b": lv.b, "rounds": lv.diff.n,
                         "live_diff_pct": lv.rel_pct, "live_half_pct": lv.rel_half_pct,
                         "live": lv.verdict(), "sim_diff_pct": sv.rel_pct,
                         "sim_half_pct": sv.rel_half_pct, "status": p.status})
        return pd.DataFrame(rows)


def _sim_values(runs: Sequence[RoundRun], sims: Mapping[tuple[int, str], Mapping[str, float]],
                live: Values) -> Values:
    """The simulated metrics arranged like the live ones (same labels, same rounds)."""
    return {label: {r: dict(sims[(r, label)]) for r in rounds}
            for label, rounds in live.items()}


def bench_agreement(
    runs: Sequence[RoundRun], sims: Mapping[tuple[int, str], Mapping[str, float]]
) -> BenchAgreement:
    """``sims[(round, label)]``: the simulator's metrics for that live run's replay."""
    live = values_of(runs, clean_only=True)
    clean = len({r for v in live.values() for r in v})
    if clean < 2:
        live = values_of(runs, clean_only=False)
    sim = _sim_values(runs, sims, live)
    labels = [x for x in labels_of(runs) if not x.endswith(NOISE_SUFFIX)]
    pairs = []
    for key in JUDGED:
        for i, a in enumerate(labels):
            for b in labels[i + 1:]:
                pairs.append(PairAgreement(paired_diff(live, a, b, key),
                                           paired_diff(sim, a, b, key)))
    rows = []
    for label in labels:
        for key in JUDGED:
            errs, lv_all, sv_all = [], [], []
            for r, lm in live.get(label, {}).items():
                lv, sv = lm.get(key, math.nan), sim[label][r].get(key, math.nan)
                lv_all.append(lv)
                sv_all.append(sv)
                errs.append(100.0 * (sv / lv - 1.0) if lv and math.isfinite(lv) else math.nan)
            e, lvi, svi = mean_interval(errs), mean_interval(lv_all), mean_interval(sv_all)
            rows.append({"policy": label, "metric": key, "rounds": e.n, "live": lvi.mean,
                         "live_half": lvi.half_width, "sim": svi.mean,
                         "error_pct": e.mean, "error_lo": e.lo, "error_hi": e.hi,
                         "within_10": bool(math.isfinite(e.mean) and abs(e.mean) <= 10.0)})
    noise_rows = []
    twin = noise_pair(labels_of(runs))
    if twin is not None:
        for key in JUDGED:
            d = paired_diff(live, twin[0], twin[1], key)
            noise_rows.append({"metric": key, "pair": f"{twin[0]} vs {twin[1]}",
                               "diff_pct": d.rel_pct, "half_pct": d.rel_half_pct,
                               "separated": d.separated})
    rounds = len({r.round for r in runs})
    return BenchAgreement(pairs, pd.DataFrame(rows), pd.DataFrame(noise_rows),
                          clean if clean >= 2 else rounds, rounds)
