"""A sweep's series against a baseline series, paired per seed at each trace and rate.

Every series of a sweep runs the same seeds of the same trace at the same rate scale,
so a seed's arrivals and acceptance draws are shared: the difference of a metric
within a seed cancels them, and the mean difference over the seeds carries a
Student-t 95% interval (:mod:`nightjar.results.paired`). Two series' own intervals
can overlap widely while every seed puts one ahead; only the paired interval says
whether they differ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from nightjar.results.paired import paired_diff
from nightjar.sweep.figures import series_labels

# (column, header, display scale), what the paired table shows.
COLUMNS = (
    ("throughput_tok_s", "tok/s", 1.0),
    ("e2e_s_mean", "E2E s", 1.0),
    ("ttft_s_mean", "TTFT s", 1.0),
    ("tpot_s_mean", "TPOT ms", 1e3),
    ("tpot_s_p99", "TPOT p99 ms", 1e3),
)
BASELINE = "nospec"


def baseline_of(frame: pd.DataFrame) -> str:
    """``nospec`` where the sweep ran it (what speculation is measured against), else
    the first series in the grid's order."""
    series = list(dict.fromkeys(series_labels(frame)))
    return BASELINE if BASELINE in series else series[0]


def paired_frame(frame: pd.DataFrame, columns: Sequence[str] | None = None,
                 baseline: str | None = None) -> pd.DataFrame:
    """Per (trace, rate scale, series other than the baseline, column): the paired
    difference ``series - baseline`` over the seeds both ran (``diff``, ``lo``, ``hi``,
    ``n``) and whether its interval excludes zero (``separated``). Empty when the sweep
    has one series."""
    data = frame.assign(series=series_labels(frame))
    base = baseline if baseline is not None else baseline_of(frame)
    columns = [c[0] for c in COLUMNS] if columns is None else list(columns)
    rows = []
    for (trace, scale), group in data.groupby(["trace", "rate_scale"], sort=False):
        for series in dict.fromkeys(group["series"]):
            if series == base:
                continue
            for col in columns:
                values = {
                    s: {int(seed): {col: float(v)} for seed, v in zip(
                        part["seed"].tolist(), part[col].tolist(), strict=True)}
                    for s in (series, base)
                    for part in [group[group["series"] == s]]
                }
                d = paired_diff(values, series, base, col)
                rows.append({"trace": trace, "rate_scale": scale, "series": series,
                             "baseline": base, "metric": col, "n": d.diff.n,
                             "diff": d.diff.mean, "lo": d.diff.lo, "hi": d.diff.hi,
                             "separated": d.separated})
    return pd.DataFrame(rows, columns=["trace", "rate_scale", "series", "baseline", "metric",
                                       "n", "diff", "lo", "hi", "separated"])


def cell_text(row: pd.Series, scale: float) -> str:
    """``diff±half`` in display units (3 and 2 significant digits), ``*`` marking an
    interval that excludes zero."""
    text = f"{row['diff'] * scale:+.3g}"
    half = (row["hi"] - row["lo"]) / 2 * scale
    if row["n"] > 1 and math.isfinite(half):
        text += f"±{half:.2g}"
    return text + ("*" if row["separated"] else "")
