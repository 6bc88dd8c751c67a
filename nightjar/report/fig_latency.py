"""Latency ECDFs (TTFT, TPOT, E2E), the SLO limits marked: up to ``MAX_OVERLAY`` policies
overlaid, more through a policy selector (:mod:`nightjar.report.selector`)."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nightjar.core.slo import Slo
from nightjar.report.selector import add_selector, needs_selector
from nightjar.report.series import ecdf
from nightjar.report.style import MUTED, base_layout, line_style
from nightjar.results.run_set import PolicyRun

# (column, panel title, unit, scale to that unit, SLO attribute or None)
PANELS = (
    ("ttft_s", "time to first token (TTFT)", "s", 1.0, "ttft_s"),
    ("tpot_s", "time per output token (TPOT)", "ms", 1e3, "tpot_s"),
    ("e2e_s", "end-to-end latency (E2E)", "s", 1.0, None),
)


def latency_figure(runs: list[PolicyRun], colors: dict[str, str], slo: Slo,
                   focus: str | None = None) -> go.Figure:
    """``focus``: the policy highlighted first when there are too many to overlay."""
    fig = make_subplots(
        rows=1, cols=len(PANELS), subplot_titles=[p[1] for p in PANELS], shared_yaxes=True,
        horizontal_spacing=0.04,
    )
    for run in runs:
        lat = run.result.requests_frame()
        for col, (key, _, unit, scale, _) in enumerate(PANELS, start=1):
            x, y = ecdf(lat[key].to_numpy(dtype=np.float64) * scale)
            fig.add_trace(
                go.Scatter(
                    x=x.astype(np.float32), y=y.astype(np.float32), mode="lines",
                    name=run.policy, legendgroup=run.policy, showlegend=col == 1,
                    line=line_style(run.policy, colors[run.policy]),
                    hovertemplate=f"{run.policy}: %{{y:.0%}} ≤ %{{x:.3g}} {unit}<extra></extra>",
                ),
                row=1, col=col,
            )
    for col, (key, _, unit, scale, limit) in enumerate(PANELS, start=1):
        name = key.removesuffix("_s").upper()
        fig.update_xaxes(type="log", title_text=f"{name} ({unit}, log scale)", row=1, col=col)
        if limit is not None:
            value = getattr(slo, limit) * scale
            fig.add_vline(
                x=value, row=1, col=col, line={"color": MUTED, "dash": "dot", "width": 1.5}
            )
            # Annotations on a log axis take log10 coordinates (shapes do not).
            axis = "" if col == 1 else str(col)
            fig.add_annotation(
                x=math.log10(value), y=0.02, xref=f"x{axis}", yref=f"y{axis}",
                text=f"SLO {value:g} {unit}", showarrow=False, xanchor="left", xshift=3,
                font={"size": 11, "color": "#555"},
            )
        # Whole decades only: the 2 and 5 labels between them collide.
        fig.update_xaxes(dtick=1, row=1, col=col)
    fig.update_yaxes(title_text="share of finished requests", range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(tickformat=".0%")
    base_layout(fig, 360)
    fig.update_layout(hovermode="closest")
    policies = [r.policy for r in runs]
    if needs_selector(policies):
        owners = [r.policy for r in runs for _ in PANELS]
        add_selector(fig, owners, colors, focus or policies[0])
    return fig
