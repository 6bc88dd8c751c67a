"""Per policy, one small figure (stacked vertically, the same axes for every policy):
gamma over time, KV blocks over time with the draft's residency as a band under the
curve, and the gamma x batch-size heatmap (share of decode steps per batch-size bin).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nightjar.report.series import TimeSeries, gamma_batch_share
from nightjar.report.style import MUTED, base_layout, nice_ticks
from nightjar.results.run_set import PolicyRun

HEIGHT = 230
BAND_COLOR = "#6a3d9a"
RESIDENT_FROM = 0.5  # a bin counts as resident when the draft was in at least half its steps


def policy_figure(
    run: PolicyRun,
    ts: TimeSeries,
    color: str,
    *,
    span_s: float,
    gamma_max: int,
    kv_max: float,
    batch_top: int,
) -> go.Figure:
    fig = make_subplots(
        rows=1, cols=3, column_widths=[0.39, 0.39, 0.22], horizontal_spacing=0.085,
        subplot_titles=[
            "gamma over time",
            "KV cache (coloured: used, grey: capacity, bar: draft resident)",
            "% of steps per batch size",
        ],
    )
    t = ts.time_s.astype(np.float32)
    fig.add_trace(
        go.Scatter(
            x=t, y=ts.gamma.astype(np.float32), mode="lines", line={"color": color, "width": 1.2},
            hovertemplate="t %{x:.0f} s: mean gamma %{y:.2f}<extra></extra>",
        ),
        row=1, col=1,
    )
    fig.update_yaxes(
        title_text="gamma (tokens)", range=[-0.2, gamma_max + 0.2], dtick=1, row=1, col=1
    )

    band_y = -0.16 * kv_max
    fig.add_trace(
        go.Scatter(
            x=t, y=ts.kv_total.astype(np.float32), mode="lines",
            line={"color": MUTED, "width": 1, "dash": "dash", "shape": "hv"},
            hovertemplate="t %{x:.0f} s: capacity %{y:.0f} blocks<extra></extra>",
        ),
        row=1, col=2,
    )
    fig.add_trace(
        go.Scatter(
            x=t, y=ts.kv_used.astype(np.float32), mode="lines", line={"color": color, "width": 1.2},
            hovertemplate="t %{x:.0f} s: used %{y:.0f} blocks<extra></extra>",
        ),
        row=1, col=2,
    )
    resident = np.where(ts.resident >= RESIDENT_FROM, band_y, np.nan).astype(np.float32)
    fig.add_trace(
        go.Scatter(
            x=t, y=resident, mode="lines", line={"color": BAND_COLOR, "width": 7},
            connectgaps=False, hovertemplate="t %{x:.0f} s: draft resident<extra></extra>",
        ),
        row=1, col=2,
    )
    ticks = nice_ticks(kv_max)
    fig.update_yaxes(
        title_text="KV blocks", range=[band_y * 1.5, kv_max * 1.05],
        tickvals=[band_y, *ticks], ticktext=["draft", *(f"{v:,.0f}" for v in ticks)],
        row=1, col=2,
    )

    labels, share, counts = gamma_batch_share(run.result, gamma_max, batch_top)
    fig.add_trace(
        go.Heatmap(
            x=list(range(gamma_max + 1)), y=labels, z=share.astype(np.float32),
            customdata=counts.astype(np.float32), zmin=0, zmax=100, colorscale="Blues",
            xgap=1, ygap=1,
            colorbar={"title": {"text": "%", "side": "top"}, "thickness": 8, "len": 0.9,
                      "x": 1.0, "xpad": 4},
            hovertemplate="batch %{y}, gamma %{x}: %{z:.0f}% of %{customdata:.0f} steps"
            "<extra></extra>",
        ),
        row=1, col=3,
    )
    fig.update_xaxes(title_text="gamma (tokens)", dtick=1, row=1, col=3)
    fig.update_yaxes(title_text="batch (requests)", type="category", row=1, col=3)
    for col in (1, 2):
        fig.update_xaxes(title_text="time (s)", range=[0, span_s], row=1, col=col)
    base_layout(fig, HEIGHT, legend=False)
    fig.update_layout(
        title={"text": f"<b>{run.policy}</b>", "font": {"color": color, "size": 15},
               "x": 0, "xanchor": "left", "y": 0.98, "yanchor": "top"},
        margin={"t": 50, "b": 46, "l": 70, "r": 10},
        hovermode="closest",
    )
    fig.update_annotations(font_size=11)
    return fig
