"""The sweep report: bands are filled areas only (no stray markers), clipped to their
metric's range, in the same colour per policy as every other report; and it renders in a
real browser."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import nightjar
from nightjar.report.colors import policy_colors
from nightjar.sweep.figures import ATTAINMENT, LATENCY, THROUGHPUT, curves_figure, sweep_figures
from tests.browser import load


def frame() -> pd.DataFrame:
    """Three seeds per point whose t interval reaches past 100% and below 0."""
    rows = []
    for policy, offload in (("nospec", False), ("nightjar+", False), ("nightjar+", True)):
        for scale, rate in ((1.0, 2.0), (2.0, 4.0)):
            for seed, (att, ttft) in enumerate(((1.0, 0.01), (0.97, 0.9), (1.0, 0.02))):
                rows.append({"trace": "t", "policy": policy, "offload": offload,
                             "rate_scale": scale, "rate_rps": rate, "seed": seed,
                             "slo_attainment": att, "ttft_s_p50": ttft, "ttft_s_p99": ttft,
                             "tpot_s_p50": ttft / 10, "tpot_s_p99": ttft / 10})
    return pd.DataFrame(rows)


def test_bands_are_filled_areas_within_range_in_policy_colours() -> None:
    data = frame()
    fig = curves_figure(data, ATTAINMENT + LATENCY[:1], "t")
    bands = [t for t in fig.data if t.fill == "toself"]
    lines = [t for t in fig.data if t.fill != "toself"]
    assert len(bands) == len(lines) == 3 * 2
    assert {t.mode for t in bands} == {"lines"} and {t.line.width for t in bands} == {0}
    for band in bands:
        y = np.asarray(band.y, dtype=float)
        if band.xaxis == "x":  # attainment, %
            assert y.max() == pytest.approx(100.0) and y.min() >= 0.0
        else:  # TTFT p50, s: the interval of (0.01, 0.9, 0.02) reaches below 0 unclipped
            assert y.min() == 0.0
    colors = policy_colors(["nospec", "nightjar+"])
    for line in lines:
        policy = line.name.split(" · ")[0]
        assert line.line.color == colors[policy]
    # Two series of one policy differ in their dash, not their colour.
    plus = {(t.line.color, t.line.dash) for t in lines if t.name.startswith("nightjar+")}
    assert len(plus) == 2 and len({c for c, _ in plus}) == 1


def test_a_sweep_at_one_rate_draws_bars_with_intervals_not_lone_dots() -> None:
    data = frame()
    one = data[data["rate_scale"] == 1.0]
    fig = curves_figure(one, ATTAINMENT + LATENCY[:1], "t")
    assert {t.type for t in fig.data} == {"bar"} and len(fig.data) == 2
    attainment = fig.data[0]
    assert list(attainment.x) == ["nospec · offload=off", "nightjar+ · offload=off",
                                  "nightjar+ · offload=on"]
    colors = policy_colors(["nospec", "nightjar+"])
    assert list(attainment.marker.color) == [colors["nospec"], *[colors["nightjar+"]] * 2]
    # The error bar is the 95% interval clipped to 0..100%: its top is 100 exactly.
    means = np.asarray(attainment.y)
    assert np.allclose(means + np.asarray(attainment.error_y.array), 100.0)
    assert "one rate: 2 req/s" in fig.layout.title.text


@pytest.fixture(scope="module")
def sweep_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("sweep")
    nightjar.run_sweep(out, jobs=1, trace="steady_low", rate_scale=[1.0, 8.0, 16.0], seeds=3,
                       policy=["nospec", "fixed:2", "nightjar+"], slo_ttft=0.3)
    return out / "report.html"


def test_the_sweep_report_renders_with_no_stray_markers(sweep_report: Path) -> None:
    table = nightjar.load_sweep(sweep_report.parent)
    page = load(sweep_report, width=1280)
    assert page.console == []
    assert page.rendered and all(page.rendered.values())
    # Markers are drawn only on the mean lines: 3 policies x 3 rates per panel.
    panels = len(LATENCY) + len(THROUGHPUT) + len(ATTAINMENT)
    assert len(re.findall(r'class="point"', page.dom)) == panels * 3 * 3
    for fig in sweep_figures(table):
        for trace in fig.data:
            if trace.fill == "toself":
                y = np.asarray(trace.y, dtype=float)
                assert np.nanmin(y) >= 0.0
                if "attainment" in (fig.layout.title.text or ""):
                    assert np.nanmax(y) <= 100.0
