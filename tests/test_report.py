"""The HTML report: self-contained, names every policy, stays small when runs are long,
fits 1280 px, and draws what the figures promise on shared axes."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from nightjar.core.records import RequestRecord, RunResult, StepRecord
from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError
from nightjar.report.colors import NAMED, policy_colors
from nightjar.report.fig_decision import constant_gamma, decision_figure
from nightjar.report.fig_latency import latency_figure
from nightjar.report.fig_memory import memory_figure, memory_note
from nightjar.report.fig_time import time_figure
from nightjar.report.folder import write_all
from nightjar.report.page import build_page, write_report
from nightjar.report.series import (
    TIME_BINS,
    gamma_batch_share,
    span_of,
    time_series,
)
from nightjar.report.style import CONTEXT, WIDTH
from nightjar.results.run_set import ResultSet


def synthetic_run(
    policy: str, n_steps: int, n_requests: int, seed: int, slow: float = 1.0
) -> RunResult:
    """A plausible-looking run; ``slow`` scales every step time (oracle: < 1 is better)."""
    rng = np.random.default_rng(seed)
    arrivals = np.sort(rng.uniform(0, 100, n_requests))
    out = rng.integers(1, 200, n_requests)
    ttft = rng.exponential(0.5, n_requests)
    requests = [
        RequestRecord(
            i,
            float(a),
            100,
            int(o),
            first_token_s=float(a + f),
            finish_s=float(a + f + 0.02 * (o - 1)),
        )
        for i, (a, o, f) in enumerate(zip(arrivals, out, ttft, strict=True))
    ]
    batch = rng.integers(1, 64, n_steps)
    gamma = rng.integers(0, 5, n_steps)
    dt = 0.01 + 0.0005 * batch * (1 + gamma) * slow
    times = np.concatenate([[0.0], np.cumsum(dt)[:-1]])
    states = np.where(rng.random(n_steps) < 0.8, "resident", "offloaded")
    steps = [
        StepRecord(
            float(t),
            float(d),
            int(b),
            int(b // 4),
            int(g),
            0,
            int(b * g),
            int(b * g // 2),
            int(b + b * g // 2),
            int(b * 10),
            4000,
            str(s),
        )
        for t, d, b, g, s in zip(times, dt, batch, gamma, states, strict=True)
    ]
    return RunResult(
        policy,
        "sim",
        "synthetic",
        "toy",
        seed,
        float(times[-1] + dt[-1]),
        requests,
        steps,
        extra={"offloads": 3.0},
    )


SPECS = [
    "nospec", "fixed:1", "fixed:2", "fixed:3", "fixed:4", "schedule:1-16:3,17-64:1,65-:0",
    "nightjar", "nightjar+", "dsd", "banditspec", "tetris",
]


def twelve(n_steps: int = 2000, n_requests: int = 300) -> ResultSet:
    """Eleven policies plus the oracle: the most the report promises to lay out."""
    runs = [synthetic_run(s, n_steps, n_requests, i) for i, s in enumerate(SPECS)]
    oracle = synthetic_run("oracle", n_steps, n_requests, 99, slow=0.5)
    for run in [*runs, oracle]:
        run.seed = 0  # one seed: every run's regret is against this oracle
    return ResultSet.build([*runs, oracle], title="A <test>")


def test_time_series_bounded_and_conserves_tokens() -> None:
    run = synthetic_run("x", 50_000, 10, 0)
    span = span_of([run])
    ts = time_series(run, span)
    assert len(ts.time_s) == TIME_BINS
    width = span / TIME_BINS
    # Throughput x bin width adds back up to every emitted token.
    assert float(np.sum(ts.throughput_tok_s) * width) == pytest.approx(
        sum(s.emitted for s in run.steps)
    )
    assert np.nanmin(ts.gamma) >= 0 and np.nanmax(ts.gamma) <= 4
    assert np.nanmin(ts.resident) >= 0 and np.nanmax(ts.resident) <= 1
    assert np.nanmax(ts.acceptance) <= 1
    # A run half as long leaves the later bins of the shared axis empty (NaN, a gap).
    short = time_series(synthetic_run("y", 100, 10, 1), span)
    assert np.isnan(short.batch_size[-1]) and short.throughput_tok_s[-1] == 0


def test_time_series_accepts_engine_state_spelling() -> None:
    run = synthetic_run("x", 2, 2, 0)
    run.steps[0].draft_state, run.steps[1].draft_state = "RESIDENT", "offloaded"
    ts = time_series(run, 2 * run.steps[1].time_s, bins=2)
    assert list(ts.resident) == [1.0, 0.0]


def test_gamma_batch_share_rows_sum_to_100_on_shared_bins() -> None:
    run = synthetic_run("x", 5000, 10, 0)
    labels, share, counts = gamma_batch_share(run, 4, batch_top=200)
    assert labels[0] == "1" and labels[-1] == "129-200"
    assert share.shape == (len(labels), 5)
    filled = ~np.isnan(share).all(axis=1)
    assert np.allclose(share[filled].sum(axis=1), 100.0)
    assert counts.sum() == sum(1 for s in run.steps if s.batch_size >= 1)
    # The synthetic run's batches stop at 63: the rows above are empty, not dropped.
    assert np.isnan(share[-1]).all()


def test_report_self_contained_names_policies_and_small(tmp_path: Path) -> None:
    results = twelve(20_000, 2000)
    path = write_report(results, tmp_path / "r" / "report.html")
    text = path.read_text(encoding="utf-8")
    assert "plotly" in text.lower()
    assert not re.search(r"<script[^>]*\bsrc\s*=", text, re.IGNORECASE)
    for spec in [*SPECS, "oracle"]:
        assert spec in text
    assert "A &lt;test&gt;" in text  # the title is escaped
    assert "cumulative per-token latency vs oracle" in text
    assert "a reference, not a bound" in text
    # decision, bars, regret curves, memory, latency, over time
    assert text.count("Plotly.newPlot(") == 6
    size = path.stat().st_size
    # plotly.js itself is ~4.8 MB; twelve long runs add well under 1 MB.
    assert size < 5.8e6, size
    cdn = write_report(results, tmp_path / "cdn.html", cdn=True).read_text()
    assert re.search(r"<script src='https://cdn\.plot\.ly/plotly-[\d.]+\.min\.js'", cdn)
    assert len(cdn) < 1.0e6, len(cdn)


def test_every_figure_fits_the_page_width() -> None:
    results = twelve()
    runs = results.first_seed()
    colors = policy_colors([r.policy for r in runs])
    span = span_of(results.results)
    series = {r.policy: time_series(r.result, span) for r in runs}
    figs = [
        latency_figure(runs, colors, results.slo),
        time_figure(runs, series, colors, span),
        decision_figure(runs, series, colors, span_s=span, gamma_max=4, batch_top=64),
        memory_figure(runs, series, colors, span_s=span),
    ]
    for fig in figs:
        assert fig is not None and fig.layout.width <= WIDTH
    assert len(set(colors.values())) == 12  # one colour per policy, none reused


def test_latency_ecdfs_show_the_given_slo_and_a_selector_beyond_four() -> None:
    results = twelve(500, 100)
    runs = results.first_seed()
    colors = policy_colors([r.policy for r in runs])
    fig = latency_figure(runs, colors, Slo(1.5, 0.05), focus="nightjar+")
    # One trace per policy in each of the three panels, one legend entry per policy.
    assert len(fig.data) == 3 * len(runs)
    assert {t.xaxis for t in fig.data} == {"x", "x2", "x3"}
    assert sorted(t.name for t in fig.data if t.showlegend) == sorted(r.policy for r in runs)
    labels = {a.text for a in fig.layout.annotations}
    assert {"SLO 1.5 s", "SLO 50 ms"} <= labels
    assert all(ax.type == "log" for ax in (fig.layout.xaxis, fig.layout.xaxis2, fig.layout.xaxis3))
    # Twelve policies: no spaghetti. Only the chosen one and the oracle are coloured.
    coloured = {t.name for t in fig.data if t.line.color != CONTEXT}
    assert coloured == {"nightjar+", "oracle"}
    menu = fig.layout.updatemenus[0]
    assert [b.label for b in menu.buttons] == [*[r.policy for r in runs], "all, overlaid"]
    assert menu.buttons[menu.active].label == "nightjar+"
    # Choosing another policy colours that one (and the oracle) and greys the rest.
    pick = next(b for b in menu.buttons if b.label == "dsd").args[0]["line.color"]
    for trace, color in zip(fig.data, pick, strict=True):
        assert (color == colors[trace.name]) == (trace.name in ("dsd", "oracle"))
    # Four policies or fewer are overlaid, each in its colour, with no selector.
    few = runs[:3] + runs[-1:]
    small = latency_figure(few, colors, Slo(1.5, 0.05))
    assert not small.layout.updatemenus
    assert {t.line.color for t in small.data} == {colors[r.policy] for r in few}


def test_arrivals_have_their_own_axis_and_every_axis_a_unit() -> None:
    results = twelve(500, 100)
    runs = results.first_seed()
    span = span_of(results.results)
    series = {r.policy: time_series(r.result, span) for r in runs}
    fig = time_figure(runs, series, policy_colors([r.policy for r in runs]), span)
    arrivals = [t for t in fig.data if t.name == "arrivals"]
    assert len(arrivals) == 1
    others = {t.yaxis for t in fig.data if t.name != "arrivals"}
    assert arrivals[0].yaxis not in others
    for name in ("yaxis", "yaxis2", "yaxis3", "yaxis4", "yaxis5", "yaxis6"):
        assert fig.layout[name].title.text, name


def test_the_decision_figure_puts_policies_side_by_side_on_shared_axes() -> None:
    results = twelve(500, 100)
    runs = results.first_seed()
    for run in runs[1:5]:  # fixed:1..4 ran one gamma: nothing to draw for them
        for step in run.result.steps:
            step.gamma = int(run.policy[-1])
    runs[0].result.steps[0].gamma = 0
    for step in runs[0].result.steps:
        step.gamma = 0
    span = span_of(results.results)
    series = {r.policy: time_series(r.result, span) for r in runs}
    colors = policy_colors([r.policy for r in runs])
    assert [constant_gamma(r) for r in runs[:5]] == [0, 1, 2, 3, 4]
    fig = decision_figure(runs, series, colors, span_s=span, gamma_max=4, batch_top=64)
    assert fig is not None
    heat = [t for t in fig.data if t.type == "heatmap"]
    shown = [r.policy for r in runs[5:]]
    assert len(heat) == len(shown) == 7
    assert {t.coloraxis for t in heat} == {"coloraxis"}  # one colour scale for all
    # gamma axes on one 0..gamma_max scale, time axes on the trace's span
    layout = fig.layout.to_plotly_json()
    gamma_axes = [v for k, v in layout.items() if k.startswith("yaxis")
                  and v.get("title", {}).get("text") == "gamma"]
    assert gamma_axes and {tuple(v["range"]) for v in gamma_axes} <= {(-0.5, 4.5), (-0.2, 4.2)}
    time_axes = [v for k, v in layout.items() if k.startswith("xaxis")
                 and v.get("title", {}).get("text") == "time (s)"]
    assert len(time_axes) == len(shown) and {tuple(v["range"]) for v in time_axes} == {(0, span)}
    # The oracle's mean gamma is the dashed reference in every other policy's panel.
    dashed = [t for t in fig.data if t.type == "scatter" and t.line.dash == "dash"]
    assert len(dashed) == len(shown) - 1
    # Each policy's own line is in its colour; the load behind it is the same grey.
    means = [t for t in fig.data if t.type == "scatter" and t.mode == "lines+markers"]
    assert [t.line.color for t in means] == [colors[p] for p in shown]
    assert fig.layout.width <= WIDTH


def test_the_memory_timeline_shows_only_runs_that_moved_their_draft() -> None:
    results = twelve(300, 50)
    runs = results.first_seed()
    for run in runs[:-2]:
        for step in run.result.steps:
            step.draft_state = "resident"
    span = span_of(results.results)
    series = {r.policy: time_series(r.result, span) for r in runs}
    colors = policy_colors([r.policy for r in runs])
    fig = memory_figure(runs, series, colors, span_s=span)
    assert fig is not None
    titles = " ".join(a.text for a in fig.layout.annotations)
    assert runs[-2].policy in titles and "oracle" in titles and "nospec" not in titles
    # The residency bar sits below zero on the KV axis: a band, not a fill.
    bands = [t for t in fig.data if t.line.width == 6]
    assert len(bands) == 2 and all(np.nanmax(np.asarray(b.y, dtype=float)) < 0 for b in bands)
    for run in runs:
        for step in run.result.steps:
            step.draft_state = "resident"
    assert memory_figure(runs, series, colors, span_s=span) is None
    assert "--offload on" in memory_note(False)
    assert "although elastic draft memory was on" in memory_note(True)


def test_colours_are_fixed_by_policy_name() -> None:
    alone = policy_colors(["nightjar+"])
    crowd = policy_colors(["nospec", "fixed:3", "dsd", "nightjar+", "oracle"])
    assert alone["nightjar+"] == crowd["nightjar+"] == NAMED["nightjar+"]
    # A variant takes its base's colour unless the base is drawn beside it.
    assert policy_colors(["nightjar+:slo"])["nightjar+:slo"] == NAMED["nightjar+"]
    both = policy_colors(["nightjar+", "nightjar+:slo", "fixed:9", "my-policy"])
    assert len(set(both.values())) == 4
    assert both == policy_colors(["nightjar+", "nightjar+:slo", "fixed:9", "my-policy"])


def test_report_without_oracle_and_empty_input(tmp_path: Path) -> None:
    run = synthetic_run("fixed:2", 300, 50, 1)
    text = write_report(ResultSet.build([run], title="one"), tmp_path / "one.html").read_text()
    assert "fixed:2" in text and "regret" not in text.lower()
    with pytest.raises(NightjarInputError):
        build_page(ResultSet.build([]))
    # The engine's gamma_max sets the gamma axes even when no run went that high.
    wide = ResultSet.build([run], gamma_max=6)
    assert '"range":[-0.2,6.2]' in build_page(wide).replace(" ", "")
    # A run whose draft never moved gets a note instead of the memory timeline.
    for step in run.steps:
        step.draft_state = "resident"
    quiet = build_page(ResultSet.build([run], offload=False))
    assert "elastic draft memory was off" in quiet
    # A run that never stepped (e.g. an empty live replay) still gets its page.
    empty = RunResult("nospec", "live", "t", "p", 0, 0.0)
    assert "nospec" in build_page(ResultSet.build([empty]))


def test_write_all_adds_report(tmp_path: Path) -> None:
    run = synthetic_run("nightjar", 200, 20, 2)
    paths = write_all(ResultSet.build([run], title="demo"), tmp_path / "out", report=True)
    assert paths[-1] == tmp_path / "out" / "report.html"
    assert "nightjar" in paths[-1].read_text()


def test_the_summary_table_sorts_and_marks_each_ranked_columns_best() -> None:
    from html.parser import HTMLParser

    from nightjar.report.colors import policy_colors
    from nightjar.report.html_table import HEAD, summary_html

    results = twelve(600, 120)
    runs = list(results.runs)
    html_text = summary_html(runs, policy_colors([r.policy for r in runs]))

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[list[dict[str, str | None]]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag == "tr":
                self.rows.append([])
            elif tag == "td":
                self.rows[-1].append(dict(attrs))

    parsed = Cells()
    parsed.feed(html_text)
    body = [row for row in parsed.rows if row]
    assert len(body) == len(results.runs)
    e2e = [h for h, _ in HEAD].index("E2E s|mean/p99")
    tput = [h for h, _ in HEAD].index("tok/s")
    means = [r.summary.e2e_s.mean for r in results.runs]
    # Each cell carries the value it sorts by; the least mean E2E is marked, and only it.
    assert [float(str(row[e2e]["data-v"])) for row in body] == means
    bold = [i for i, row in enumerate(body) if row[e2e].get("class") == "best"]
    assert bold == [means.index(min(means))]
    tputs = [r.summary.throughput_tok_s for r in results.runs]
    bold = [i for i, row in enumerate(body) if row[tput].get("class") == "best"]
    assert bold == [tputs.index(max(tputs))]
    # A column that describes rather than ranks (mean gamma) marks nothing.
    gamma = [h for h, _ in HEAD].index("mean|gamma")
    assert not [row for row in body if row[gamma].get("class") == "best"]
    assert "addEventListener('click'" in html_text
