"""The report's plotly figures: per-run columns and the cross-policy comparison.

Size rule: step series longer than ``MAX_POINTS`` are cut into ``MAX_POINTS``
consecutive equal-count buckets, each drawn at its first step's time with the bucket
mean of batch size, waiting queue, gamma and KV blocks (so a bucket's gamma is the
share-weighted mix of the lengths that ran; a switch-heavy stretch shows as a
fractional gamma rather than vanishing). Latency ECDFs are drawn at ``ECDF_POINTS``
quantiles. Arrays go in as float32, which plotly stores base64-encoded.
"""

from __future__ import annotations

from functools import partial

import numpy as np
import numpy.typing as npt
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from nightjar.metrics import Summary, request_latencies
from nightjar.records import RunResult
from nightjar.regret import Regret, regret_curve

MAX_POINTS = 2000
ECDF_POINTS = 400
ARRIVAL_BINS = 200
# Matches nightjar.memory.DraftState.RESIDENT's value (compared case-insensitively).
RESIDENT = "resident"
ROWS = ("arrivals & waiting", "batch size", "gamma", "KV blocks", "latency ECDF (s)")
LAT_COLORS = {"ttft_s": "#1f77b4", "tpot_s": "#ff7f0e", "e2e_s": "#2ca02c"}
F32 = npt.NDArray[np.float32]


def downsample_steps(steps: pd.DataFrame, max_points: int = MAX_POINTS) -> pd.DataFrame:
    """Bucket means of the plotted step columns (see the module docstring)."""
    cols = ["batch_size", "num_waiting", "gamma", "kv_used_blocks", "kv_total_blocks"]
    steps = steps.sort_values("time_s", kind="stable")
    data = {c: steps[c].to_numpy(dtype=np.float64) for c in cols}
    data["resident"] = (steps["draft_state"].astype(str).str.lower() == RESIDENT).to_numpy(
        dtype=np.float64
    )
    times = steps["time_s"].to_numpy(dtype=np.float64)
    n = len(times)
    if n <= max_points:
        return pd.DataFrame({"time_s": times, **data})
    starts = np.linspace(0, n, max_points, endpoint=False).astype(np.int64)
    counts = np.diff(np.append(starts, n))
    out = {k: np.add.reduceat(v, starts) / counts for k, v in data.items()}
    return pd.DataFrame({"time_s": times[starts], **out})


def _f32(values: npt.ArrayLike) -> F32:
    return np.asarray(values, dtype=np.float32)


def _ecdf(values: npt.NDArray[np.float64]) -> tuple[F32, F32]:
    values = values[np.isfinite(values)]
    if values.size == 0:
        return _f32([]), _f32([])
    probs = np.linspace(0.0, 1.0, min(ECDF_POINTS, values.size))
    return _f32(np.quantile(values, probs)), _f32(probs)


def _add_line(
    fig: go.Figure,
    col: int,
    legend: bool,
    name: str,
    x: F32,
    y: F32,
    row: int,
    color: str,
    **kw: object,
) -> None:
    # Legend entries come from the first column only; legendgroup links the columns.
    scatter = go.Scatter(
        x=x,
        y=y,
        name=name,
        legendgroup=name,
        showlegend=legend,
        mode="lines",
        line={"color": color, "width": 1},
        **kw,
    )
    fig.add_trace(scatter, row=row, col=col)


def run_figure(results: list[RunResult]) -> go.Figure:
    n = len(results)
    titles = [
        f"{r.policy}: {row}" if i == 0 else row for i, row in enumerate(ROWS) for r in results
    ]
    fig = make_subplots(
        rows=len(ROWS),
        cols=n,
        subplot_titles=titles,
        vertical_spacing=0.05,
        horizontal_spacing=0.2 / max(n, 1),
    )
    for col, result in enumerate(results, start=1):
        first = col == 1
        steps = downsample_steps(result.steps_frame())
        t = _f32(steps["time_s"])
        arrivals = np.array([r.arrival_s for r in result.requests], dtype=np.float64)
        span = max(result.duration_s, float(arrivals.max()) if arrivals.size else 0.0, 1e-9)
        hist, edges = np.histogram(arrivals, bins=ARRIVAL_BINS, range=(0.0, span))
        line = partial(_add_line, fig, col, first)

        line(
            "arrivals (req/s)",
            _f32(edges[:-1]),
            _f32(hist / np.diff(edges)),
            1,
            "#7f7f7f",
            line_shape="hv",
        )
        line("waiting", t, _f32(steps["num_waiting"]), 1, "#d62728")
        line("batch size", t, _f32(steps["batch_size"]), 2, "#1f77b4")
        line("gamma", t, _f32(steps["gamma"]), 3, "#9467bd", line_shape="hv")
        shade = np.where(steps["resident"] >= 0.5, steps["kv_total_blocks"], 0.0)
        line(
            "draft resident",
            t,
            _f32(shade),
            4,
            "rgba(148,103,189,0.35)",
            fill="tozeroy",
            line_shape="hv",
        )
        line("KV capacity", t, _f32(steps["kv_total_blocks"]), 4, "#000000", line_shape="hv")
        line("KV used", t, _f32(steps["kv_used_blocks"]), 4, "#2ca02c")
        lat = request_latencies(result.requests_frame())
        for key, color in LAT_COLORS.items():
            x, y = _ecdf(lat[key].to_numpy(dtype=np.float64))
            line(key.removesuffix("_s").upper(), x, y, 5, color)
        fig.update_xaxes(type="log", row=5, col=col)
        for row in range(1, 5):
            fig.update_xaxes(title_text="time (s)" if row == 4 else None, row=row, col=col)
    fig.update_layout(
        height=230 * len(ROWS),
        width=max(900, 360 * n),
        margin={"t": 50, "b": 40, "l": 50, "r": 20},
        template="plotly_white",
        legend={"orientation": "h", "y": 1.04},
    )
    fig.update_annotations(font_size=11)
    return fig


def comparison_figures(
    summaries: list[Summary],
    regrets: dict[str, Regret] | None,
    results: list[RunResult],
    oracle: RunResult | None,
) -> list[go.Figure]:
    names = [s.policy for s in summaries]
    panels = ["output throughput (tok/s)", "E2E latency (s)", "goodput (req/s)"]
    if regrets is not None:
        panels.append("regret vs oracle (%)")
    fig = make_subplots(rows=1, cols=len(panels), subplot_titles=panels)
    fig.add_trace(
        go.Bar(x=names, y=[s.throughput_tok_s for s in summaries], name="tok/s", showlegend=False),
        row=1,
        col=1,
    )
    fig.add_trace(
        go.Bar(x=names, y=[s.e2e_s.mean for s in summaries], name="E2E mean"), row=1, col=2
    )
    fig.add_trace(go.Bar(x=names, y=[s.e2e_s.p99 for s in summaries], name="E2E p99"), row=1, col=2)
    fig.add_trace(
        go.Bar(x=names, y=[s.goodput_req_s for s in summaries], name="goodput", showlegend=False),
        row=1,
        col=3,
    )
    if regrets is not None:
        fig.add_trace(
            go.Bar(
                x=names, y=[regrets[n].percent for n in names], name="regret %", showlegend=False
            ),
            row=1,
            col=4,
        )
    fig.update_layout(
        height=420,
        width=max(900, 320 * len(panels)),
        barmode="group",
        template="plotly_white",
        margin={"t": 50, "b": 120},
    )
    figs = [fig]
    if oracle is not None:
        curves = go.Figure()
        for result in results:
            if result is oracle:
                continue
            c = regret_curve(result, oracle)
            curves.add_trace(
                go.Scatter(
                    x=_f32(c["time_s"]),
                    y=_f32(c["regret_pct"]),
                    name=result.policy,
                    mode="lines+markers",
                )
            )
        curves.update_layout(
            title=f"cumulative regret vs {oracle.policy} (%)",
            xaxis_title="simulated time (s)",
            yaxis_title="regret %",
            template="plotly_white",
            height=420,
            width=900,
        )
        figs.append(curves)
    return figs
