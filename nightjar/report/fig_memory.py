"""The draft's memory over time: one row per policy whose draft left the GPU.

Each row: the KV blocks the scheduler may hand out (grey, it grows while the draft is
offloaded), the blocks in use (the policy's colour), the waiting queue (right axis,
dotted) and a band under the curve where the draft was resident. Only policies that
moved the draft are drawn; the page says so when none did (:func:`memory_note`).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nightjar.report.series import TimeSeries
from nightjar.report.style import MUTED, base_layout, nice_ticks
from nightjar.results.run_set import PolicyRun

ROW_PX = 170
BAND_COLOR = "#6a3d9a"
MOVED = {"offloading", "offloaded", "reloading"}
RESIDENT_FROM = 0.5  # a bin counts as resident when the draft was in at least half its steps


def moved_draft(run: PolicyRun) -> bool:
    """Whether the run's draft ever left (or was leaving, or coming back to) the GPU."""
    return any(s.draft_state.lower() in MOVED for s in run.result.steps)


def memory_note(offload: bool | None) -> str:
    """What the page says when no policy moved its draft, and why none could."""
    if offload is False:
        return ("No policy offloaded its draft: elastic draft memory was off. With"
                " <code>--offload on</code> the memory controller moves the draft to host"
                " memory when speculation is off and the KV cache runs short, gives its"
                " memory to the KV cache, and brings it back when load drops; its timeline"
                " then appears here.")
    if offload is True:
        return ("No policy offloaded its draft although elastic draft memory was on: the KV"
                " cache never ran short while speculation was off (or the draft holds too"
                " little memory to be worth moving).")
    return ("No policy offloaded its draft (elastic draft memory is off unless"
            " <code>--offload on</code>).")


def memory_figure(
    runs: list[PolicyRun], series: dict[str, TimeSeries], colors: dict[str, str],
    *, span_s: float,
) -> go.Figure | None:
    """Small multiples for the runs that moved their draft; None when none did."""
    shown = [r for r in runs if moved_draft(r)]
    if not shown:
        return None
    kv_max = max(1.0, *(float(np.nanmax(series[r.policy].kv_total, initial=0.0))
                        for r in shown))
    wait_max = max(1.0, *(float(np.nanmax(series[r.policy].waiting, initial=0.0))
                          for r in shown))
    fig = make_subplots(
        rows=len(shown), cols=1, shared_xaxes=True, vertical_spacing=0.12 / len(shown),
        specs=[[{"secondary_y": True}]] * len(shown),
        subplot_titles=[f"<b><span style='color:{colors[r.policy]}'>{r.policy}</span></b>:"
                        " KV blocks (coloured: used, grey: capacity, bar: draft resident),"
                        " waiting requests (dotted)" for r in shown],
    )
    band_y = -0.12 * kv_max
    ticks = nice_ticks(kv_max)
    for row, run in enumerate(shown, start=1):
        ts, color = series[run.policy], colors[run.policy]
        t = ts.time_s.astype(np.float32)
        fig.add_trace(go.Scatter(
            x=t, y=ts.kv_total.astype(np.float32), mode="lines", showlegend=False,
            line={"color": MUTED, "width": 1.2, "dash": "dash", "shape": "hv"},
            hovertemplate=f"{run.policy}: t %{{x:.0f}} s, capacity %{{y:.0f}} blocks"
            "<extra></extra>",
        ), row=row, col=1)
        fig.add_trace(go.Scatter(
            x=t, y=ts.kv_used.astype(np.float32), mode="lines", showlegend=False,
            line={"color": color, "width": 1.4},
            hovertemplate=f"{run.policy}: t %{{x:.0f}} s, used %{{y:.0f}} blocks<extra></extra>",
        ), row=row, col=1)
        resident = np.where(ts.resident >= RESIDENT_FROM, band_y, np.nan).astype(np.float32)
        fig.add_trace(go.Scatter(
            x=t, y=resident, mode="lines", line={"color": BAND_COLOR, "width": 6},
            connectgaps=False, showlegend=False,
            hovertemplate="t %{x:.0f} s: draft resident<extra></extra>",
        ), row=row, col=1)
        fig.add_trace(go.Scatter(
            x=t, y=ts.waiting.astype(np.float32), mode="lines", showlegend=False,
            line={"color": color, "width": 1, "dash": "dot"},
            hovertemplate=f"{run.policy}: t %{{x:.0f}} s, %{{y:.0f}} waiting<extra></extra>",
        ), row=row, col=1, secondary_y=True)
        fig.update_yaxes(
            title_text="KV blocks", range=[band_y * 1.6, kv_max * 1.05],
            tickvals=[band_y, *ticks], ticktext=["draft", *(f"{v:,.0f}" for v in ticks)],
            row=row, col=1, secondary_y=False,
        )
        fig.update_yaxes(title_text="waiting", range=[0, wait_max * 1.05], showgrid=False,
                         tickvals=nice_ticks(wait_max, 3), row=row, col=1, secondary_y=True)
    fig.update_xaxes(range=[0, span_s])
    fig.update_xaxes(title_text="time since trace start (s)", row=len(shown), col=1)
    base_layout(fig, ROW_PX * len(shown) + 80, legend=False)
    fig.update_annotations(x=0, xanchor="left", font_size=11)
    fig.update_layout(hovermode="closest", margin={"t": 40, "b": 46, "l": 70, "r": 60})
    return fig
