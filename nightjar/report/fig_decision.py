"""The decision, side by side: how each policy chose gamma against batch size and over time.

Small multiples, one column per policy (at most ``COLS`` a row), on shared axes:

- top panel: for each batch-size bin (x), the share of its decode steps that ran each
  gamma (y; shaded, one colour scale for every panel) and the mean gamma (the
  policy's colour); the oracle's mean gamma is drawn dashed in every other panel, so
  each policy reads against the right answer;
- bottom panel: the policy's mean gamma over time over the trace's load (arrivals per
  second, grey, right axis), the same load for every policy.

A policy that ran one gamma in every decode step (``fixed:G``, ``nospec``) draws
nothing a reader needs: it is named in the caption instead (:func:`constant_gamma`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nightjar.report.colors import ORACLE, ORACLE_COLOR, base_name
from nightjar.report.series import TimeSeries, arrival_rate, gamma_batch_share
from nightjar.report.style import MUTED, base_layout, nice_ticks
from nightjar.results.run_set import PolicyRun

COLS = 4
BATCH_PX = 170
TIME_PX = 110
GAP_PX = 62  # between panels: tick labels, an axis title and the next panel's title
MARGIN_PX = 80
LOAD = "rgba(136,136,136,0.25)"
STATIC = {"nospec", "fixed", "schedule"}  # specs whose gamma is a fixed rule


def focus_policy(runs: list[PolicyRun]) -> str:
    """The policy a selector highlights first: the first adaptive one (not a static
    spec, not the oracle) whose gamma varied, else the first that varied, else the
    first policy."""
    varying = [r.policy for r in runs if constant_gamma(r) is None]
    adaptive = [p for p in varying if p != ORACLE and base_name(p) not in STATIC]
    return next(iter(adaptive or varying), runs[0].policy)


def constant_gamma(run: PolicyRun) -> int | None:
    """The one gamma every decode step of the run used, or None if it varied (or the
    run had no decode step)."""
    used = {s.gamma for s in run.result.steps if s.batch_size >= 1}
    return used.pop() if len(used) == 1 else None


def _mean_gamma(share: npt.NDArray[np.float64]) -> list[float]:
    """Mean gamma per batch-size row of a share matrix (NaN for an empty row)."""
    gammas = np.arange(share.shape[1], dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return [float(v) for v in (share * gammas).sum(axis=1) / share.sum(axis=1)]


def decision_figure(
    runs: list[PolicyRun],
    series: dict[str, TimeSeries],
    colors: dict[str, str],
    *,
    span_s: float,
    gamma_max: int,
    batch_top: int,
) -> go.Figure | None:
    """The figure for the runs whose gamma varied; None when none did."""
    shown = [r for r in runs if constant_gamma(r) is None]
    if not shown:
        return None
    cols = min(COLS, len(shown))
    pairs = math.ceil(len(shown) / cols)
    specs = [[{}] * cols, [{"secondary_y": True}] * cols] * pairs
    heights = [BATCH_PX, TIME_PX] * pairs
    titles = []
    for p in range(pairs):
        part = shown[p * cols:(p + 1) * cols]
        titles += [f"<b><span style='color:{colors[r.policy]}'>{r.policy}</span></b>: gamma"
                   " by batch size" for r in part] + [""] * (cols - len(part))
        titles += ["over time, on the load"] * len(part) + [""] * (cols - len(part))
    plot_px = sum(heights) + GAP_PX * (2 * pairs - 1)
    fig = make_subplots(
        rows=2 * pairs, cols=cols, specs=specs, row_heights=heights, subplot_titles=titles,
        horizontal_spacing=0.07 if cols > 1 else 0.0, vertical_spacing=GAP_PX / plot_px,
        shared_yaxes=False,
    )
    oracle = next((r for r in shown if r.policy == ORACLE), None)
    oracle_mean = None
    if oracle is not None:
        _, share, _ = gamma_batch_share(oracle.result, gamma_max, batch_top)
        oracle_mean = _mean_gamma(np.nan_to_num(share))
    t_load, load = arrival_rate(runs[0].result, span_s)
    load_top = float(np.nanmax(load, initial=0.0)) * 1.1 or 1.0
    for k, run in enumerate(shown):
        row, col = 2 * (k // cols) + 1, k % cols + 1
        color = colors[run.policy]
        labels, share, counts = gamma_batch_share(run.result, gamma_max, batch_top)
        fig.add_trace(go.Heatmap(
            x=labels, y=list(range(gamma_max + 1)), z=share.T.astype(np.float32),
            customdata=counts.T.astype(np.float32), coloraxis="coloraxis", xgap=1, ygap=1,
            hovertemplate=f"{run.policy}: batch %{{x}}, gamma %{{y}}: %{{z:.0f}}% of "
            "%{customdata:.0f} steps<extra></extra>",
        ), row=row, col=col)
        fig.add_trace(go.Scatter(
            x=labels, y=_mean_gamma(np.nan_to_num(share)), mode="lines+markers",
            line={"color": color, "width": 2}, marker={"size": 5, "color": color},
            name=run.policy, legendgroup=run.policy, showlegend=False,
            hovertemplate=f"{run.policy}: batch %{{x}}, mean gamma %{{y:.2f}}<extra></extra>",
        ), row=row, col=col)
        if oracle_mean is not None and run.policy != ORACLE:
            fig.add_trace(go.Scatter(
                x=labels, y=oracle_mean, mode="lines",
                line={"color": ORACLE_COLOR, "width": 1.2, "dash": "dash"},
                name="oracle", showlegend=False, hoverinfo="skip",
            ), row=row, col=col)
        # Bins are labelled by their first batch size (the hover names the whole bin),
        # so ten bins fit a quarter of the page.
        fig.update_xaxes(type="category", title_text="batch size (bin from)", row=row, col=col,
                         tickangle=0, tickfont={"size": 9}, title_font={"size": 10},
                         title_standoff=2, tickvals=labels,
                         ticktext=[label.split("-")[0] for label in labels])
        fig.update_yaxes(range=[-0.5, gamma_max + 0.5], dtick=1, row=row, col=col,
                         title_text="gamma" if col == 1 else None)
        ts = series[run.policy]
        fig.add_trace(go.Scatter(
            x=t_load.astype(np.float32), y=load.astype(np.float32), mode="lines",
            line={"color": LOAD, "width": 0, "shape": "hv"}, fill="tozeroy", fillcolor=LOAD,
            showlegend=False, hovertemplate="%{y:.1f} req/s arriving<extra>load</extra>",
        ), row=row + 1, col=col, secondary_y=True)
        fig.add_trace(go.Scatter(
            x=ts.time_s.astype(np.float32), y=ts.gamma.astype(np.float32), mode="lines",
            line={"color": color, "width": 1.4}, showlegend=False,
            hovertemplate=f"{run.policy}: t %{{x:.0f}} s, mean gamma %{{y:.2f}}<extra></extra>",
        ), row=row + 1, col=col, secondary_y=False)
        fig.update_xaxes(range=[0, span_s], title_text="time (s)", row=row + 1, col=col,
                         title_font={"size": 10}, title_standoff=2, tickfont={"size": 9})
        fig.update_yaxes(range=[-0.2, gamma_max + 0.2], dtick=1, row=row + 1, col=col,
                         secondary_y=False, title_text="gamma" if col == 1 else None)
        fig.update_yaxes(range=[0, load_top], row=row + 1, col=col, secondary_y=True,
                         showgrid=False, tickfont={"color": MUTED, "size": 9},
                         tickvals=nice_ticks(load_top, 2),
                         title_text="req/s" if col == cols or k == len(shown) - 1 else None,
                         title_font={"color": MUTED, "size": 10})
    base_layout(fig, plot_px + MARGIN_PX, legend=False)
    fig.update_layout(
        coloraxis={"colorscale": "Blues", "cmin": 0, "cmax": 100,
                   "colorbar": {"title": {"text": "% of<br>steps", "side": "top"},
                                "thickness": 8, "len": 0.3, "y": 1.0, "yanchor": "top"}},
        hovermode="closest", margin={"t": 40, "b": 40, "l": 60, "r": 60},
    )
    fig.update_annotations(font_size=11)
    return fig
