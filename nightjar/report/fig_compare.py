"""Cross-policy bars (throughput, E2E, goodput, regret) and cumulative regret curves."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nightjar.core.slo import Slo
from nightjar.report.selector import add_selector, needs_selector
from nightjar.report.style import base_layout, line_style
from nightjar.results.regret import regret_curve
from nightjar.results.run_set import PolicyRun, ResultSet


def slo_text(slo: Slo) -> str:
    return f"TTFT ≤ {slo.ttft_s:g} s and TPOT ≤ {slo.tpot_s * 1e3:g} ms"


def bars_figure(runs: list[PolicyRun], colors: dict[str, str], slo: Slo) -> go.Figure:
    """Horizontal bars, one row per policy (names stay legible for a dozen policies)."""
    with_regret = any(r.regret is not None for r in runs)
    panels = ["output throughput", "E2E latency: bar mean, ◆ p99", "goodput"]
    slo_short = f"TTFT ≤ {slo.ttft_s:g} s, TPOT ≤ {slo.tpot_s * 1e3:g} ms"
    units = ["tokens/s", "seconds", f"requests/s meeting the SLO<br>({slo_short})"]
    if with_regret:
        panels.append("regret vs oracle")
        units.append("% per-token latency<br>over the oracle's")
    fig = make_subplots(
        rows=1, cols=len(panels), subplot_titles=panels, shared_yaxes=True,
        horizontal_spacing=0.035,
    )
    names = [r.policy for r in runs]
    color = [colors[n] for n in names]
    s = [r.summary for r in runs]

    def bar(
        values: list[float], col: int, unit: str, fmt: str, also: list[float] | None = None
    ) -> None:
        finite = [v for v in [*values, *(also or [])] if math.isfinite(v)] or [0.0]
        lo, hi = min(0.0, *finite), max(0.0, *finite)
        pad = 0.08 * (hi - lo or 1.0)
        # Room for labels that sit outside short (or negative) bars.
        fig.update_xaxes(range=[lo - (pad if lo < 0 else 0), hi + pad], row=1, col=col)
        fig.add_trace(
            go.Bar(
                y=names, x=values, orientation="h", marker_color=color, showlegend=False,
                hovertemplate=f"%{{y}}: %{{x:{fmt}}} {unit}<extra></extra>",
                text=[f"{v:{fmt}}" if math.isfinite(v) else "" for v in values],
                textposition="auto", textfont_size=10, cliponaxis=False,
            ),
            row=1, col=col,
        )

    bar([x.throughput_tok_s for x in s], 1, "tok/s", ".0f")
    bar([x.e2e_s.mean for x in s], 2, "s mean", ".1f", also=[x.e2e_s.p99 for x in s])
    fig.add_trace(
        go.Scatter(
            y=names, x=[x.e2e_s.p99 for x in s], mode="markers", showlegend=False,
            marker={"symbol": "diamond", "color": "#222", "size": 8},
            hovertemplate="%{y}: p99 %{x:.1f} s<extra></extra>",
        ),
        row=1, col=2,
    )
    bar([x.goodput_req_s for x in s], 3, "req/s", ".2f")
    if with_regret:
        bar([r.regret.percent if r.regret else np.nan for r in runs], 4, "%", ".1f")
    base_layout(fig, 80 + 24 * len(runs), legend=False)
    for col, unit in enumerate(units, start=1):
        fig.update_xaxes(title_text=unit, row=1, col=col)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    fig.update_layout(hovermode="closest", margin={"t": 30, "b": 46, "l": 10, "r": 10})
    return fig


def regret_figure(results: ResultSet, colors: dict[str, str],
                  focus: str | None = None) -> go.Figure | None:
    """Cumulative regret against the oracle over time; beyond ``MAX_OVERLAY`` policies
    one is highlighted at a time (``focus`` first)."""
    oracle = results.oracle
    if oracle is None:
        return None
    fig = go.Figure()
    drawn = []
    for run in results.first_seed():
        if run.result is oracle:
            continue
        c = regret_curve(run.result, oracle)
        fig.add_trace(
            go.Scatter(
                x=c["time_s"].to_numpy(np.float32), y=c["regret_pct"].to_numpy(np.float32),
                name=run.policy, mode="lines", line=line_style(run.policy, colors[run.policy]),
            )
        )
        drawn.append(run.policy)
    base_layout(fig, 340)
    fig.update_layout(hovermode="closest")
    fig.update_xaxes(title_text="time (s)")
    fig.update_yaxes(title_text=f"cumulative regret vs {oracle.policy} (%)")
    if needs_selector(drawn):
        add_selector(fig, drawn, colors, focus if focus in drawn else drawn[0])
    return fig
