"""Paired differences over rounds: when one policy really beats another on the engine.

The live benchmark runs every policy once per round, the rounds interleaved, so two
policies' runs in the same round share the machine's state of that moment. The
difference ``A - B`` within each round cancels what the round shared (a slower
minute, a warmer cache); its mean over the rounds with a Student-t 95% interval
(``nightjar.results.stats``) is much tighter than the two policies' own intervals,
and "A differs from B" is claimed only where that paired interval excludes zero.
Rounds where either run is missing (or the metric is NaN) are left out of that pair.
Pure Python.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from nightjar.results.stats import Interval, mean_interval

# The metrics the benchmark and the agreement check judge, and which way is better
# (None: neither; mean batch size is a description of the run, not a goal).
METRICS: tuple[tuple[str, str, bool | None], ...] = (
    ("throughput_tok_s", "throughput", True),
    ("tpot_s_mean", "mean TPOT", False),
    ("ttft_s_mean", "mean TTFT", False),
    ("e2e_s_mean", "mean E2E", False),
    ("mean_batch_size", "mean batch", None),
)
METRIC_NAMES = {key: name for key, name, _ in METRICS}
HIGHER_IS_BETTER = {key: up for key, _, up in METRICS}

# values[label][round] -> metric -> value
Values = Mapping[str, Mapping[int, Mapping[str, float]]]


@dataclass(frozen=True, slots=True)
class PairedDiff:
    """``a - b`` of one metric over the rounds both ran in."""

    a: str
    b: str
    metric: str
    diff: Interval  # of a - b
    b_mean: float  # b's mean over the same rounds (for the relative size)

    @property
    def separated(self) -> bool:
        """The paired interval excludes zero (two rounds at least)."""
        return self.diff.n > 1 and (self.diff.lo > 0.0 or self.diff.hi < 0.0)

    @property
    def sign(self) -> str:
        """``">"`` (a's metric is larger), ``"<"``, or ``"~"`` (not separated)."""
        if not self.separated:
            return "~"
        return ">" if self.diff.mean > 0 else "<"

    @property
    def rel_pct(self) -> float:
        return 100.0 * self.diff.mean / self.b_mean if self.b_mean else math.nan

    @property
    def rel_half_pct(self) -> float:
        return 100.0 * self.diff.half_width / abs(self.b_mean) if self.b_mean else math.nan

    def verdict(self) -> str:
        """In words: "a beats b" / "b beats a" (or "a > b" where no side is better)."""
        if not self.separated:
            return "unresolved"
        better = HIGHER_IS_BETTER.get(self.metric)
        if better is None:
            return f"{self.a} {self.sign} {self.b}"
        a_wins = (self.diff.mean > 0) == better
        return f"{self.a} beats {self.b}" if a_wins else f"{self.b} beats {self.a}"


def paired_diff(values: Values, a: str, b: str, metric: str) -> PairedDiff:
    rounds = sorted(set(values.get(a, {})) & set(values.get(b, {})))
    diffs, bs = [], []
    for r in rounds:
        va, vb = values[a][r].get(metric, math.nan), values[b][r].get(metric, math.nan)
        if math.isfinite(va) and math.isfinite(vb):
            diffs.append(va - vb)
            bs.append(vb)
    return PairedDiff(a, b, metric, mean_interval(diffs), sum(bs) / len(bs) if bs else math.nan)


def all_pairs(
    values: Values, labels: Sequence[str], metrics: Sequence[str] | None = None
) -> list[PairedDiff]:
    """Every unordered pair of ``labels`` (in their order) for every metric."""
    keys = list(metrics) if metrics is not None else [k for k, _, _ in METRICS]
    return [paired_diff(values, a, b, m) for m in keys for a, b in combinations(labels, 2)]


def per_label(values: Values, label: str, metric: str) -> Interval:
    """One label's mean and 95% interval of a metric over its rounds."""
    return mean_interval([v.get(metric, math.nan) for v in values.get(label, {}).values()])
