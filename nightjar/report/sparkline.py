"""Unicode sparklines for terminal summaries (rates over time, step sizes)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: Sequence[float] | np.ndarray, lo: float | None = None,
              hi: float | None = None) -> str:
    """One bar character per value, scaled linearly from ``lo`` (default: min, or 0 if
    all values are >= 0) to ``hi`` (default: max). NaN renders as a space."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return ""
    finite = v[np.isfinite(v)]
    if finite.size == 0:
        return " " * v.size
    low = (0.0 if finite.min() >= 0 else float(finite.min())) if lo is None else lo
    high = float(finite.max()) if hi is None else hi
    span = high - low
    out = []
    for x in v:
        if not np.isfinite(x):
            out.append(" ")
            continue
        # A flat series renders mid-height rather than all-bottom, so "constant"
        # does not read as "zero".
        frac = 0.5 if span <= 0 else min(max((x - low) / span, 0.0), 1.0)
        out.append(BARS[round(frac * (len(BARS) - 1))])
    return "".join(out)
