"""A policy that never speculates runs with no draft loaded; both engines see the arrival rate."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from nightjar.cli import main
from nightjar.core.arrivals import ARRIVAL_WINDOW_S, ArrivalRate
from nightjar.core.types import StepContext, StepOutcome
from nightjar.policies.registry import spec_needs_draft
from nightjar.profile.profile import load_profile
from nightjar.sim import simulate
from nightjar.trace.trace import load_trace

RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"


def test_cli_nospec_has_the_no_draft_capacity_on_the_rtx4090(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = main(["sim", "--trace", "steady_low", "--profile", RTX, "--policy", "nospec",
                 "--policy", "nospec:resident", "--offload", "on", "--no-oracle",
                 "--no-report", "--quiet", "--out", str(out)])
    capsys.readouterr()
    assert code == 0
    rows = list(csv.DictReader((out / "nospec" / "steps.csv").open()))
    assert {r["kv_total_blocks"] for r in rows} == {"4938"}
    assert {r["draft_state"] for r in rows} == {"absent"}
    resident = list(csv.DictReader((out / "nospec-resident" / "steps.csv").open()))
    assert {r["kv_total_blocks"] for r in resident} == {"3180"}


def test_draftless_is_a_declared_property() -> None:
    assert not spec_needs_draft("nospec") and not spec_needs_draft("fixed:0")
    assert spec_needs_draft("nospec:resident") and spec_needs_draft("fixed:1")
    assert spec_needs_draft("nightjar") and spec_needs_draft("not-registered")


class _Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.rates: list[tuple[float, float | None]] = []

    def decide(self, ctx: StepContext) -> int:
        self.rates.append((ctx.now, ctx.arrival_rate_rps))
        return 0

    def observe(self, outcome: StepOutcome) -> None:
        pass


def test_sim_fills_the_arrival_rate_over_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    import nightjar.sim.runner as runner

    rec = _Recorder()
    monkeypatch.setattr(runner, "make_policy", lambda spec, env: rec)
    trace = load_trace("steady_low")
    simulate(trace, load_profile(RTX), "recorder")
    arrivals = trace.arrival_s
    for now, rate in rec.rates[:: max(len(rec.rates) // 50, 1)]:
        expected = np.sum((arrivals <= now) & (arrivals > now - ARRIVAL_WINDOW_S))
        assert rate == pytest.approx(expected / ARRIVAL_WINDOW_S)


def test_arrival_rate_window() -> None:
    r = ArrivalRate(10.0)
    for t in (0.0, 1.0, 2.0, 11.5):
        r.record(t)
    assert r.rate(11.5) == pytest.approx(2 / 10.0)  # 0.0 and 1.0 have left the window
