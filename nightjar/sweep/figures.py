"""Load-latency curves of a sweep table, with 95% bands across seeds (plotly figures).

A *series* is one combination of the grid's non-load axes (policy, profile, offload,
...); its points are the rate scales, drawn at the mean offered rate of that scale's
seeds. Each point is the mean over seeds, and the shaded band its 95% t interval
(:func:`nightjar.results.stats.mean_interval`); one seed draws no band.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nightjar.results.stats import mean_interval

# Axes that tell series apart, in the order labels name them.
SERIES_AXES = ("policy", "profile", "offload", "reload", "draft_kv", "acceptance_model",
               "gamma_max", "max_num_seqs", "max_num_batched_tokens", "engine", "prior",
               "max_model_len")
# (column, panel title, scale to display units)
LATENCY = (("ttft_s_p50", "TTFT p50 (s)", 1.0), ("ttft_s_p99", "TTFT p99 (s)", 1.0),
           ("tpot_s_p50", "TPOT p50 (ms)", 1e3), ("tpot_s_p99", "TPOT p99 (ms)", 1e3))
THROUGHPUT = (("throughput_tok_s", "throughput (tok/s)", 1.0),
              ("goodput_req_s", "goodput (req/s)", 1.0))
ATTAINMENT = (("slo_attainment", "SLO attainment (%)", 100.0),)
# What a table needs for the figures (the columns every sweep table has).
REQUIRED_COLUMNS = ("trace", "policy", "rate_scale", "rate_rps", "seed",
                    *(col for col, _, _ in LATENCY + THROUGHPUT + ATTAINMENT))
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")


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
        row: dict[str, object] = {"trace": trace, "series": series, "rate_scale": scale,
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


def curves_figure(
    frame: pd.DataFrame,
    panels: Sequence[tuple[str, str, float]],
    title: str,
    trace: str | None = None,
) -> go.Figure:
    """One panel per metric, one line per series, x = offered rate (req/s)."""
    if trace is not None:
        frame = frame[frame["trace"] == trace]
    agg = aggregate(frame, [p[0] for p in panels])
    cols = min(len(panels), 2)
    rows = math.ceil(len(panels) / cols)
    fig = make_subplots(rows=rows, cols=cols, subplot_titles=[p[1] for p in panels])
    for k, series in enumerate(dict.fromkeys(agg["series"])):
        color = COLORS[k % len(COLORS)]
        part = agg[agg["series"] == series]
        x = part["rate_rps"].tolist()
        for j, (col, _, scale) in enumerate(panels):
            r, c = j // cols + 1, j % cols + 1
            hi = (part[f"{col}_hi"] * scale).tolist()
            lo = (part[f"{col}_lo"] * scale).tolist()
            if (part["n"] > 1).any():
                fig.add_trace(go.Scatter(
                    x=x + x[::-1], y=hi + lo[::-1], fill="toself", fillcolor=_rgba(color, 0.18),
                    line={"width": 0}, hoverinfo="skip", showlegend=False, legendgroup=series,
                ), row=r, col=c)
            fig.add_trace(go.Scatter(
                x=x, y=(part[col] * scale).tolist(), name=series, mode="lines+markers",
                line={"color": color}, legendgroup=series, showlegend=j == 0,
            ), row=r, col=c)
            fig.update_xaxes(title_text="offered rate (req/s)", row=r, col=c)
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
