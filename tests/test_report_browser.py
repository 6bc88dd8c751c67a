"""The report in a real browser (headless Chromium): every figure draws, nothing logs
an error, and at 1280 px the page never scrolls sideways, with twelve policies."""

from __future__ import annotations

from pathlib import Path

import pytest

from nightjar.profile.model import DEFAULT_PROFILE, load_profile
from nightjar.report.page import write_report
from nightjar.results.run_set import ResultSet
from nightjar.sim import SimConfig, simulate_many
from nightjar.trace.model import load_trace
from tests.browser import load
from tests.test_report import twelve


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_report(twelve(3000, 400), tmp_path_factory.mktemp("r") / "report.html")


def test_report_renders_every_figure_without_errors_at_1280(report: Path) -> None:
    page = load(report, width=1280)
    assert page.console == []
    assert len(page.rendered) == 4 + 12  # comparison, latency, regret, time + per policy
    assert all(page.rendered.values()), [k for k, ok in page.rendered.items() if not ok]
    assert page.scroll_width is not None and page.scroll_width <= 1280


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
    path = write_report(ResultSet.build(runs, title="steady_low"), tmp_path / "report.html")
    page = load(path, width=1280)
    assert page.console == []
    assert len(page.rendered) == 4 + 3 and all(page.rendered.values())
    assert page.scroll_width is not None and page.scroll_width <= 1280
