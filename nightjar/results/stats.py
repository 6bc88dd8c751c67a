"""Confidence intervals over repeated runs (seeds), and when a difference is real.

Every comparison Nightjar prints across seeds uses this one module: a Student-t
interval of the mean at 95% (runs at different seeds are independent draws of the
same experiment), and "A beats B" only where the two intervals do not overlap.
Numpy only: the core must not depend on scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Two-sided 95% Student-t critical values t_{0.975, df} for df = 1..30 (standard
# table values); beyond 30 the Cornish-Fisher expansion below is within 1e-4.
_T975 = (
    12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060, 2.2622, 2.2281,
    2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199, 2.1098, 2.1009, 2.0930, 2.0860,
    2.0796, 2.0739, 2.0687, 2.0639, 2.0595, 2.0555, 2.0518, 2.0484, 2.0452, 2.0423,
)
_Z975 = 1.959964


def t_critical_95(df: int) -> float:
    """The two-sided 95% critical value of Student's t with ``df`` degrees of freedom."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    # Cornish-Fisher expansion of the t quantile around the normal one.
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    )


@dataclass(frozen=True, slots=True)
class Interval:
    """A mean with its 95% confidence interval; ``lo == hi == mean`` for one run."""

    mean: float
    lo: float
    hi: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.hi - self.lo) / 2.0

    def above(self, other: Interval) -> bool:
        """True only where this interval lies entirely above ``other`` (no overlap)."""
        return self.n > 1 and other.n > 1 and self.lo > other.hi

    def below(self, other: Interval) -> bool:
        return other.above(self)

    def format(self, fmt: str = "{:.2f}") -> str:
        """``mean ± half-width`` (just the mean for a single run)."""
        if self.n < 2 or not math.isfinite(self.half_width):
            return fmt.format(self.mean)
        return f"{fmt.format(self.mean)} ± {fmt.format(self.half_width)}"


def mean_interval(values: Sequence[float]) -> Interval:
    """The t interval of the mean of ``values``; NaNs are dropped, not averaged."""
    xs = [float(v) for v in values if not math.isnan(float(v))]
    n = len(xs)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = sum(xs) / n
    if n == 1:
        return Interval(mean, mean, mean, 1)
    var = sum((x - mean) ** 2 for x in xs) / (n - 1)
    half = t_critical_95(n - 1) * math.sqrt(var / n)
    return Interval(mean, mean - half, mean + half, n)


def compare(a: Interval, b: Interval) -> str:
    """``">"``, ``"<"`` or ``"~"`` (intervals overlap: no claim either way)."""
    if a.above(b):
        return ">"
    if a.below(b):
        return "<"
    return "~"
