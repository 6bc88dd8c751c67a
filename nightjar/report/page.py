"""Assemble the report page from a ResultSet: header, summary table, figures, notes.

Sections, top to bottom (the page is at most 1200 px wide, so a 1280 px window
never scrolls sideways, for any number of policies):

1. the summary table and the SLO the goodput counts against;
2. the decision: each policy's gamma against batch size and over time on the trace's
   load, side by side against the oracle's (:mod:`nightjar.report.fig_decision`);
3. comparison bars (throughput, E2E mean and p99, goodput, regret vs the bound), one row
   per policy, and the cumulative per-token latency against the per-step oracle run;
4. the draft's memory over time for every policy that offloaded it, or a note saying
   why none did (:mod:`nightjar.report.fig_memory`);
5. latency ECDFs, SLO limits marked;
6. over time: arrivals (own panel), waiting queue, batch, throughput, step time,
   acceptance, KV blocks used.

Up to four policies share an axis; more get a policy selector that highlights one
(:mod:`nightjar.report.selector`). Colours are fixed by policy name
(:mod:`nightjar.report.colors`).

plotly.js is inlined once in ``<head>`` (the file opens offline) or, with ``cdn``,
loaded from plotly's CDN (a small file that needs the network to render).
"""

from __future__ import annotations

import html
from pathlib import Path

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs, get_plotlyjs_version

from nightjar.errors import NightjarInputError
from nightjar.report.colors import ORACLE, policy_colors
from nightjar.report.fig_compare import bars_figure, regret_figure, slo_text
from nightjar.report.fig_decision import constant_gamma, decision_figure, focus_policy
from nightjar.report.fig_latency import latency_figure
from nightjar.report.fig_memory import memory_figure, memory_note
from nightjar.report.fig_time import time_figure
from nightjar.report.html_table import summary_html
from nightjar.report.selector import needs_selector
from nightjar.report.series import (
    ECDF_POINTS,
    TIME_BINS,
    TimeSeries,
    max_batch,
    span_of,
    time_series,
)
from nightjar.report.style import PAGE_WIDTH
from nightjar.results.run_set import PolicyRun, ResultSet

CSS = (
    "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:16px auto;"
    f"max-width:{PAGE_WIDTH}px;padding:0 16px;color:#222}}"
    "h1{font-size:22px;margin:8px 0}h2{font-size:18px;margin:28px 0 6px;"
    "border-bottom:1px solid #ddd;padding-bottom:4px}"
    ".meta{color:#555;font-size:13px;margin:2px 0}"
    "table.summary{border-collapse:collapse;font-size:12px;width:100%}"
    "table.summary td,table.summary th{padding:3px 6px;border-bottom:1px solid #e4e4e4;"
    "text-align:right;white-space:nowrap}"
    "table.summary th{font-weight:600;border-bottom:2px solid #bbb;cursor:pointer}"
    "table.summary th[data-dir=up]::after{content:' \\25B2'}"
    "table.summary th[data-dir=down]::after{content:' \\25BC'}"
    "table.summary td.best{background:#dff0d8}"
    "table.summary td.name,table.summary th:first-child{text-align:left}"
    "table.summary td.name{white-space:normal;overflow-wrap:anywhere;max-width:220px}"
    ".sw{display:inline-block;width:10px;height:10px;margin-right:6px;border-radius:2px}"
    ".note{color:#555;font-size:13px;max-width:1100px;line-height:1.4}"
    ".fig{margin:4px 0}"
)
# No mode bar: it overlaps panel titles; drag zooms and a double click resets anyway.
CONFIG = {"displayModeBar": False, "responsive": False}


def _div(fig: go.Figure) -> str:
    body = fig.to_html(full_html=False, include_plotlyjs=False, config=CONFIG)
    return f"<div class='fig'>{body}</div>"


def _plotly_script(cdn: bool) -> str:
    if cdn:
        url = f"https://cdn.plot.ly/plotly-{get_plotlyjs_version()}.min.js"
        return f"<script src='{url}' charset='utf-8'></script>"
    return f"<script type='text/javascript'>{get_plotlyjs()}</script>"


def build_page(results: ResultSet, *, cdn: bool = False) -> str:
    """The whole HTML document (see the module docstring for its sections)."""
    if not results.runs:
        raise NightjarInputError("report needs at least one run")
    runs = results.first_seed()
    colors = policy_colors([r.policy for r in runs])
    slo = runs[0].summary.slo
    span = span_of([r.result for r in runs])
    series = {r.policy: time_series(r.result, span) for r in runs}
    used = max(max((s.gamma for s in r.result.steps), default=0) for r in runs)
    gamma_max = max(1, used, results.gamma_max or 0)
    batch_top = max_batch([r.result for r in runs])
    focus = focus_policy(runs)
    title = results.title or "nightjar run"
    meta = [
        f"{label} {', '.join(dict.fromkeys(str(getattr(r, key)) for r in results.results))}"
        for label, key in (("trace", "trace"), ("engine", "engine"), ("profile", "profile"),
                           ("seed", "seed"))
    ]
    parts = [
        f"<h1>{html.escape(title)}</h1>",
        f"<p class='meta'>{html.escape(' · '.join(meta))}</p>",
        "<h2>Summary</h2>",
        summary_html(runs, colors),
        f"<p class='note'>Goodput counts finished requests with {html.escape(slo_text(slo))}"
        " (the SLO). Latencies are over finished requests. Hover a column head for its"
        " meaning, click it to sort; shading marks each ranked column's best value.</p>",
        *_decision(runs, series, colors, span, gamma_max, batch_top),
        "<h2>Comparison</h2>",
        _div(bars_figure(runs, colors, slo)),
    ]
    regret = regret_figure(results, colors, focus)
    if regret is not None:
        parts += [
            "<p class='note'>Per-token latency / the per-step oracle run's - 1, where"
            " per-token latency = sum(step time x batch size) / emitted tokens, over the"
            " steps that ended by each time. The per-step oracle ignores switch costs and"
            " runs its own trajectory: a reference, not a bound (the regret column of the"
            " table is against the bound).</p>",
            _div(regret),
        ]
    parts += ["<h2>Draft memory</h2>"]
    memory = memory_figure(runs, series, colors, span_s=span)
    if memory is None:
        parts.append(f"<p class='note'>{memory_note(results.offload)}</p>")
    else:
        parts += [
            "<p class='note'>For each policy whose draft left the GPU: KV blocks the"
            " scheduler may hand out (grey dashed; it grows while the draft is offloaded),"
            " blocks in use (coloured), the requests waiting (dotted, right axis), and a"
            " bar under the curve where the draft was resident in at least half of a"
            " bin's steps.</p>",
            _div(memory),
        ]
    select = (" With more than four policies one is highlighted at a time: choose it"
              " above the figure (the others stay in grey).") if needs_selector(
        [r.policy for r in runs]) else ""
    parts += [
        "<h2>Latency</h2>",
        "<p class='note'>Share of finished requests at or below each latency (ECDF, log"
        f" scale, drawn at {ECDF_POINTS} quantiles); dotted lines: the SLO limits. Click a"
        f" policy in the legend to hide it, double-click to show it alone.{select}</p>",
        _div(latency_figure(runs, colors, slo, focus)),
        "<h2>Over time</h2>",
        f"<p class='note'>Each run is cut into {TIME_BINS} equal time bins on one time axis;"
        " a point is the bin's mean (throughput: tokens emitted in the bin / its width;"
        " acceptance: accepted / drafted tokens in the bin). Gaps: no step in the bin."
        f"{select}</p>",
        _div(time_figure(runs, series, colors, span, focus)),
    ]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width'>"
        f"<title>{html.escape(title)}</title><style>{CSS}</style>{_plotly_script(cdn)}"
        f"</head><body>{''.join(parts)}</body></html>"
    )


def _decision(runs: list[PolicyRun], series: dict[str, TimeSeries], colors: dict[str, str],
              span: float, gamma_max: int, batch_top: int) -> list[str]:
    """The gamma-vs-batch and gamma-over-time comparison, and who it leaves out."""
    fig = decision_figure(runs, series, colors, span_s=span, gamma_max=gamma_max,
                          batch_top=batch_top)
    constant = [(r.policy, g) for r in runs if (g := constant_gamma(r)) is not None]
    left_out = ", ".join(f"{html.escape(p)} (gamma {g})" for p, g in constant)
    parts = ["<h2>How each policy chose gamma</h2>"]
    if fig is None:
        parts.append(f"<p class='note'>Every policy ran one gamma throughout: {left_out}.</p>")
        return parts
    oracle = (" The dashed line is the oracle's mean gamma, the best choice for these"
              " arrivals and acceptance rates.") if any(r.policy == ORACLE for r in runs) else ""
    rest = f" Not drawn, one gamma in every decode step: {left_out}." if constant else ""
    parts += [
        "<p class='note'>Top: for each batch-size bin (x), the share of its decode steps"
        " that ran each gamma (shade) and the mean gamma (line)." + oracle + " Bottom: mean"
        " gamma per time bin over the trace's load (grey: requests arriving per second,"
        " right axis)." + rest + "</p>",
        _div(fig),
    ]
    return parts


def write_report(results: ResultSet, path: Path, *, cdn: bool = False) -> Path:
    """Write the report to ``path`` (parent folders are created) and return it."""
    page = build_page(results, cdn=cdn)
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise NightjarInputError(f"cannot write to {path}: {exc.strerror or exc}") from None
    return path
