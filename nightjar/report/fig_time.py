"""Over time, on shared axes: load, queue, batch, throughput, step time, acceptance, KV use.

Arrivals come from the trace, the same for every policy, so they get their own panel
(drawn once, in grey) rather than sharing an axis with the waiting queue. Up to
``MAX_OVERLAY`` policies are overlaid; more go through a policy selector
(:mod:`nightjar.report.selector`).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nightjar.report.selector import add_selector, needs_selector
from nightjar.report.series import TimeSeries, arrival_rate
from nightjar.report.style import MUTED, base_layout, line_style
from nightjar.results.run_set import PolicyRun

# (TimeSeries field, panel title, y-axis title with unit)
ROWS = (
    ("waiting", "waiting queue", "requests"),
    ("batch_size", "running batch", "requests"),
    ("throughput_tok_s", "output throughput", "tokens/s"),
    ("step_ms", "mean step time", "ms"),
    ("acceptance", "draft acceptance (accepted / drafted)", "share"),
    ("kv_used", "KV cache used", "blocks"),
)
ROW_PX = 165


def time_figure(
    runs: list[PolicyRun], series: dict[str, TimeSeries], colors: dict[str, str], span_s: float,
    focus: str | None = None,
) -> go.Figure:
    """``focus``: the policy highlighted first when there are too many to overlay."""
    titles = ["arrivals (from the trace, the same for every policy)", *(r[1] for r in ROWS)]
    fig = make_subplots(
        rows=len(titles), cols=1, shared_xaxes=True, subplot_titles=titles,
        vertical_spacing=0.045,
    )
    t_arr, rate = arrival_rate(runs[0].result, span_s)
    fig.add_trace(
        go.Scatter(
            x=t_arr.astype(np.float32), y=rate.astype(np.float32), mode="lines",
            line={"color": MUTED, "width": 1.2, "shape": "hv"}, showlegend=False,
            name="arrivals", hovertemplate="%{y:.1f} req/s<extra>arrivals</extra>",
        ),
        row=1, col=1,
    )
    fig.update_yaxes(title_text="requests/s", rangemode="tozero", row=1, col=1)
    for row, (field, _, unit) in enumerate(ROWS, start=2):
        for run in runs:
            ts = series[run.policy]
            fig.add_trace(
                go.Scatter(
                    x=ts.time_s.astype(np.float32),
                    y=np.asarray(getattr(ts, field), dtype=np.float32),
                    mode="lines", name=run.policy, legendgroup=run.policy,
                    showlegend=row == 2, line=line_style(run.policy, colors[run.policy]),
                    hovertemplate=f"%{{y:.3g}} {unit}<extra>{run.policy}</extra>",
                ),
                row=row, col=1,
            )
        fig.update_yaxes(title_text=unit, rangemode="tozero", row=row, col=1)
    fig.update_yaxes(range=[0, 1.02], row=len(titles) - 1, col=1)
    fig.update_xaxes(range=[0, span_s])
    fig.update_xaxes(title_text="time since trace start (s)", row=len(titles), col=1)
    base_layout(fig, ROW_PX * len(titles) + 60)
    fig.update_annotations(x=0, xanchor="left")
    fig.update_layout(hovermode="closest")
    policies = [r.policy for r in runs]
    if needs_selector(policies):
        owners = [None] + [r.policy for _ in ROWS for r in runs]
        add_selector(fig, owners, colors, focus or policies[0])
    return fig
