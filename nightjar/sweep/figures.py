"""Load-latency curves of a sweep table, with 95% bands across seeds (plotly figures).

A *series* is one combination of the grid's non-load axes (policy, profile, offload,
...); its points are the rate scales, drawn at the mean offered rate of that scale's
seeds. Each point is the mean over seeds, and the shaded band its 95% t interval
(:func:`nightjar.results.stats.mean_interval`), drawn as a filled area only and
clipped to the metric's range (a latency is never below 0, an SLO attainment never
outside 0..100%): the t interval of a few seeds may reach past them. One seed draws
no band. A series takes its policy's colour, the same as in every other report
(:mod:`nightjar.report.colors`); series of one policy that differ in another axis
differ in their dash.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nightjar.report.colors import policy_colors
from nightjar.results.stats import mean_interval

# Axes that tell series apart, in the order labels name them.
SERIES_AXES = ("policy", "profile", "offload", "reload", "draft_kv", "acceptance_model",
               "gamma_max", "max_num_seqs", "max_num_batched_tokens", "engine", "prior",
               "max_model_len", "burstiness")
# (column, panel title, scale to display units, the metric's range in display units)
Panel = tuple[str, str, float, tuple[float, float]]
NONNEG = (0.0, math.inf)
LATENCY: tuple[Panel, ...] = (
    ("ttft_s_p50", "TTFT p50 (s)", 1.0, NONNEG), ("ttft_s_p99", "TTFT p99 (s)", 1.0, NONNEG),
    ("tpot_s_p50", "TPOT p50 (ms)", 1e3, NONNEG), ("tpot_s_p99", "TPOT p99 (ms)", 1e3, NONNEG),
)
THROUGHPUT: tuple[Panel, ...] = (("throughput_tok_s", "throughput (tok/s)", 1.0, NONNEG),
                                 ("goodput_req_s", "goodput (req/s)", 1.0, NONNEG))
ATTAINMENT: tuple[Panel, ...] = (("slo_attainment", "SLO attainment (%)", 100.0, (0.0, 100.0)),)
DASHES = ("solid", "dash", "dot", "dashdot", "longdash", "longdashdot")
# What a table needs for the figures (the columns every sweep table has).
REQUIRED_COLUMNS = ("trace", "policy", "rate_scale", "rate_rps", "seed",
                    *(col for col, _, _, _ in LATENCY + THROUGHPUT + ATTAINMENT))


def series_labels(frame: pd.DataFrame) -> pd.Series:
    """One label per row: the policy, then the other non-load axes that vary."""
    varying = [c for c in SERIES_AXES[1:] if c in frame.columns and frame[c].nunique() > 1]

    def label(row: pd.Series) -> str:
        # The policy always names the series; other axes only where they vary.
        return " · ".join([str(row["policy"]), *(f"{c}={_show(row[c])}" for c in varying)])

    return frame.apply(label, axis=1)


def _show(value: object) -> str:
    # The table stores offload as a boolean; people set it as on/off.
    return ("on" if value else "off") if isinstance(value, bool | np.bool_) else str(value)


def aggregate(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Per (trace, series, rate scale): mean offered rate and each column's interval
    (``<col>``, ``<col>_lo``, ``<col>_hi``, and the number of seeds ``n``)."""
    data = frame.assign(series=series_labels(frame))
    rows = []
    for (trace, series, scale), group in data.groupby(
        ["trace", "series", "rate_scale"], sort=False
    ):
        row: dict[str, object] = {"trace": trace, "series": series,
                                  "policy": str(group["policy"].iloc[0]), "rate_scale": scale,
                                  "rate_rps": float(group["rate_rps"].mean()),
                                  "n": len(group)}
        for col in columns:
            iv = mean_interval(pd.to_numeric(group[col], errors="coerce").tolist())
            row.update({col: iv.mean, f"{col}_lo": iv.lo, f"{col}_hi": iv.hi})
        rows.append(row)
    out = pd.DataFrame(rows)
    # Series in the grid's order (the order the user listed policies), then by load.
    order = {name: k for k, name in enumerate(dict.fromkeys(out["series"]))}
    traces = {name: k for k, name in enumerate(dict.fromkeys(out["trace"]))}
    out["_t"], out["_s"] = out["trace"].map(traces), out["series"].map(order)
    return out.sort_values(["_t", "_s", "rate_rps"], kind="stable").drop(columns=["_t", "_s"])


def _rgba(color: str, alpha: float) -> str:
    r, g, b = (int(color[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def series_styles(agg: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """(colour, dash) per series: the policy's colour; the k-th series of one policy
    (in the grid's order) the k-th dash."""
    first = agg.drop_duplicates("series")
    policy_of = dict(zip(first["series"], first["policy"], strict=True))
    colors = policy_colors(policy_of.values())
    seen: dict[str, int] = {}
    out: dict[str, tuple[str, str]] = {}
    for series, policy in policy_of.items():
        k = seen.get(policy, 0)
        seen[policy] = k + 1
        out[series] = (colors[policy], DASHES[k % len(DASHES)])
    return out


def band(lo: Sequence[float], hi: Sequence[float], bounds: tuple[float, float]
         ) -> tuple[list[float], list[float]]:
    """The interval clipped to the metric's range (NaN stays NaN: no band there)."""
    low, high = bounds
    return (np.clip(np.asarray(lo, dtype=float), low, high).tolist(),
            np.clip(np.asarray(hi, dtype=float), low, high).tolist())


def curves_figure(
    frame: pd.DataFrame,
    panels: Sequence[Panel],
    title: str,
    trace: str | None = None,
) -> go.Figure:
    """One panel per metric, one line per series, x = offered rate (req/s); at a single
    rate (a sweep over other axes only), one bar per series with its 95% interval."""
    if trace is not None:
        frame = frame[frame["trace"] == trace]
    agg = aggregate(frame, [p[0] for p in panels])
    styles = series_styles(agg)
    cols = min(len(panels), 2)
    rows = math.ceil(len(panels) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[p[1] for p in panels])
    if agg["rate_scale"].nunique() == 1:
        rate = float(agg["rate_rps"].mean())
        return _bars(fig, agg, panels, styles, f"{title} (one rate: {rate:.3g} req/s)", rows)
    for series in dict.fromkeys(agg["series"]):
        color, dash = styles[series]
        part = agg[agg["series"] == series]
        x = part["rate_rps"].tolist()
        for j, (col, _, scale, bounds) in enumerate(panels):
            r, c = j // cols + 1, j % cols + 1
            lo, hi = band(part[f"{col}_lo"] * scale, part[f"{col}_hi"] * scale, bounds)
            if (part["n"] > 1).any():
                # mode="lines" with no width: the area only (without a mode plotly
                # draws a marker at every corner of the polygon).
                fig.add_trace(go.Scatter(
                    x=x + x[::-1], y=hi + lo[::-1], fill="toself", fillcolor=_rgba(color, 0.18),
                    mode="lines", line={"width": 0, "color": color}, hoverinfo="skip",
                    showlegend=False, legendgroup=series, name=f"{series} 95% band",
                ), row=r, col=c)
            fig.add_trace(go.Scatter(
                x=x, y=(part[col] * scale).tolist(), name=series, mode="lines+markers",
                line={"color": color, "dash": dash}, marker={"color": color, "size": 6},
                legendgroup=series, showlegend=j == 0,
            ), row=r, col=c)
            fig.update_xaxes(title_text="offered rate (req/s)", row=r, col=c)
            if bounds == (0.0, 100.0):
                fig.update_yaxes(range=[-2, 102], row=r, col=c)
            else:
                fig.update_yaxes(rangemode="tozero", row=r, col=c)
    fig.update_layout(title=title, template="plotly_white", height=330 * rows + 80,
                      width=1000, margin={"t": 80})
    return fig


def _bars(fig: go.Figure, agg: pd.DataFrame, panels: Sequence[Panel],
          styles: dict[str, tuple[str, str]], title: str, rows: int) -> go.Figure:
    """Each series one bar per panel, in its policy's colour, with its 95% interval
    (clipped to the metric's range) as an error bar: a line through one point per
    series would be a row of lone dots."""
    cols = min(len(panels), 2)
    names = agg["series"].tolist()
    colors = [styles[name][0] for name in names]
    for j, (col, _, scale, bounds) in enumerate(panels):
        r, c = j // cols + 1, j % cols + 1
        mean = (agg[col] * scale).to_numpy(dtype=float)
        lo, hi = band((agg[f"{col}_lo"] * scale).tolist(),
                      (agg[f"{col}_hi"] * scale).tolist(), bounds)
        error = {"type": "data", "symmetric": False, "visible": bool((agg["n"] > 1).any()),
                 "array": np.nan_to_num(np.asarray(hi) - mean).tolist(),
                 "arrayminus": np.nan_to_num(mean - np.asarray(lo)).tolist()}
        fig.add_trace(go.Bar(x=names, y=mean.tolist(), marker={"color": colors},
                             error_y=error, showlegend=False, name=panels[j][1]),
                      row=r, col=c)
        if bounds == (0.0, 100.0):
            fig.update_yaxes(range=[0, 102], row=r, col=c)
    fig.update_layout(title=title, template="plotly_white", height=330 * rows + 80,
                      width=1000, margin={"t": 80})
    return fig


def sweep_figures(frame: pd.DataFrame) -> list[go.Figure]:
    """Per trace: latency vs rate, throughput and goodput vs rate, SLO attainment vs rate."""
    figs = []
    for trace in dict.fromkeys(frame["trace"]):
        figs.append(curves_figure(frame, LATENCY, f"{trace}: latency vs offered rate", trace))
        figs.append(curves_figure(frame, THROUGHPUT,
                                  f"{trace}: throughput and goodput vs offered rate", trace))
        figs.append(curves_figure(frame, ATTAINMENT, f"{trace}: SLO attainment vs offered rate",
                                  trace))
    return figs
