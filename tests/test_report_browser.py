"""The report in a real browser (headless Chromium): every figure draws, nothing logs
an error, and at 1280 px the page never scrolls sideways, with twelve policies."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from nightjar.profile.profile import DEFAULT_PROFILE, load_profile
from nightjar.report.page import write_report
from nightjar.results.run_set import ResultSet
from nightjar.sim import SimConfig, simulate_many
from nightjar.trace.trace import load_trace
from tests.browser import load
from tests.test_report import twelve


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(twelve(3000, 400), tmp_path_factory.mktemp("r") / "report.html")


def test_report_renders_every_figure_without_errors_at_1280(report: Path) -> None:
    page = load(report, width=1280)
    assert page.console == []
    # decision, comparison, regret, memory, latency, time: one figure each, whatever the
    # number of policies (small multiples and selectors, not one figure per policy)
    assert len(page.rendered) == 6
    assert all(page.rendered.values()), [k for k, ok in page.rendered.items() if not ok]
    assert page.scroll_width is not None and page.scroll_width <= 1280


def test_a_click_on_a_column_head_sorts_the_summary(report: Path) -> None:
    # Click mean E2E's head once (ascending), and throughput's twice (descending).
    heads = "var h=document.querySelectorAll('table.summary th');"
    for column, clicks_js, descending in ((5, "h[5].click();", False),
                                          (2, "h[2].click();h[2].click();", True)):
        page = load(report, width=1280, after_load=heads + clicks_js)
        assert page.console == []
        table = page.dom[page.dom.index("<table class=\"summary\""):]
        table = table[: table.index("</table>")]
        rows = re.findall(r"<tr>(.*?)</tr>", table)[1:]
        values = [float(re.findall(r'data-v="([^"]*)"', row)[column]) for row in rows]
        assert len(values) == 12 and values == sorted(values, reverse=descending), values


def test_a_figure_that_does_not_draw_fails_the_check(report: Path, tmp_path: Path) -> None:
    # The check must be able to fail: break one figure's plot call and look again.
    broken = tmp_path / "broken.html"
    text = report.read_text(encoding="utf-8")
    broken.write_text(text.replace("Plotly.newPlot(", "Plotly.noSuchCall(", 1), encoding="utf-8")
    page = load(broken, width=1280)
    assert sum(not ok for ok in page.rendered.values()) == 1
    assert any("noSuchCall" in m for m in page.console), page.console


def test_a_simulated_run_renders_too(tmp_path: Path) -> None:
    runs = simulate_many(
        load_trace("steady_low"), load_profile(DEFAULT_PROFILE),
        ["nospec", "nightjar", "oracle"], SimConfig(seed=0),
    )
    path = write_report(ResultSet.build(runs, title="steady_low", offload=False),
                        tmp_path / "report.html")
    page = load(path, width=1280)
    assert page.console == []
    # decision, comparison, regret, latency, time; no draft moved: a note, no timeline
    assert len(page.rendered) == 5 and all(page.rendered.values())
    assert "elastic draft memory was off" in page.dom
    assert page.scroll_width is not None and page.scroll_width <= 1280


def test_offloading_runs_draw_the_memory_timeline_after_the_decision(tmp_path: Path) -> None:
    # A load that fills the RTX 4090's pool, then leaves it: the controller offloads.
    from nightjar.trace.trace import Trace

    trace = Trace.from_segments([(2, 20), (40, 25, 0.5), (1, 25)], seed=4, name="spike")
    runs = simulate_many(
        trace, load_profile("rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"),
        ["nospec", "fixed:1", "nightjar+", "oracle"], SimConfig(seed=0, offload=True),
    )
    assert any(r.extra["offloads"] > 0 for r in runs)
    path = write_report(ResultSet.build(runs, title="spike", offload=True),
                        tmp_path / "report.html")
    page = load(path, width=1280)
    assert page.console == [] and all(page.rendered.values())
    assert len(page.rendered) == 6
    heads = re.findall(r"<h2>([^<]+)</h2>", page.dom)
    assert heads[:3] == ["Summary", "How each policy chose gamma", "Comparison"]
    assert "Draft memory" in heads and "KV blocks (coloured: used" in page.dom
    assert page.scroll_width is not None and page.scroll_width <= 1280
