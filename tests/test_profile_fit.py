"""Profiles fitted from runs' own steps (nightjar.fidelity.fit, `profile --from-run`).

The runs here are simulated on a known "machine" (a profile, possibly scaled), so the
fit has a right answer: a profile fitted on a base from a machine's steps must price
the cells those steps reached as the machine does, and leave the others the base's.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nightjar.cli import main
from nightjar.core.records import RunResult
from nightjar.fidelity.fit import fit_profile
from nightjar.fidelity.ratio_grid import PRIOR_STEPS, RatioGrid
from nightjar.profile.profile import Profile, load_profile
from nightjar.report.folder import write_all
from nightjar.results.run_set import ResultSet
from nightjar.sim import SimConfig, simulate
from nightjar.trace.trace import load_trace

BASE = "a100-80gb/vicuna-13b+vicuna-68m"
SLOWER = 1.3


@cache
def runs_on(factor: float) -> tuple[RunResult, ...]:
    """Three policies' runs on the base's machine made ``factor`` times as slow."""
    base = load_profile(BASE)
    machine = base if factor == 1.0 else base.scaled(factor)
    cfg = SimConfig(seed=1, max_num_seqs=64, max_num_batched_tokens=2048, gamma_max=3)
    trace = load_trace("steady_low")
    return tuple(simulate(trace, machine, p, cfg) for p in ("nospec", "fixed:3", "nightjar+"))


def fitted_on(factor: float) -> tuple[Profile, Profile, dict[str, Any]]:
    base = load_profile(BASE)
    data, _ = fit_profile(list(runs_on(factor)), base)
    return Profile.from_json(data, "fitted"), base, data["measured"]["fit"]


def test_a_slower_machine_is_recovered_where_its_steps_reached() -> None:
    fitted, base, fit = fitted_on(SLOWER)
    well = [(b, g, c) for b, g, c, w, _ in fit["decode_cells"] if w >= 100]
    assert len(well) >= 20
    ratios = [fitted.step_time_s(b, g, c) / base.step_time_s(b, g, c) for b, g, c in well]
    # Shrunk toward the base by PRIOR_STEPS of its own: at >= 100 steps, within 2%.
    assert min(ratios) > SLOWER ** (100 / (100 + PRIOR_STEPS)) - 0.01
    assert max(ratios) < SLOWER + 1e-6
    # Prompts too: the mixed and prefill cells the runs reached move toward 1.3.
    mixed = {(b, t): v for b, t, v in fitted.to_json()["mixed"]}
    base_mixed = {(b, t): v for b, t, v in _base_mixed(fitted, base)}
    moved = [mixed[(b, t)] / base_mixed[(b, t)] for b, t, w, _ in fit["mixed_cells"] if w >= 10]
    assert moved and 1.1 < float(np.median(moved)) < SLOWER + 0.02
    prefill = [fitted.prefill_time_s(int(t)) / base.prefill_time_s(int(t))
               for t, w, _ in fit["prefill_cells"] if w >= 2]
    assert prefill and all(1.05 < r < SLOWER + 0.02 for r in prefill)


def _base_mixed(fitted: Profile, base: Profile) -> list[list[float]]:
    """The base's mixed table on the fitted one's grid (the base has none: its own
    prefill curve, as the fit prices it before correcting)."""
    from nightjar.sim.price import StepPricer

    pricer = StepPricer(base)
    return [[b, t, 1e3 * pricer.prompt_s(int(b), int(b), int(t), False)[0]]
            for b, t, _ in fitted.to_json()["mixed"]]


def test_cells_no_step_reached_stay_the_bases() -> None:
    fitted, base, fit = fitted_on(SLOWER)
    reached = {(b, g, float(c)) for b, g, c, _, _ in fit["decode_cells"]}
    far = [(b, g, c) for b in base.batch_sizes for g in range(base.gamma_max + 1)
           for c in base.context_lens if b >= 256 and (b, g, float(c)) not in reached]
    assert far
    for b, g, c in far:
        assert fitted.step_time_s(b, g, c) == pytest.approx(base.step_time_s(b, g, c), rel=1e-3)


def test_the_bases_own_steps_leave_it_as_it_is() -> None:
    # The fit prices steps with the simulator's own price function: on runs simulated
    # on the base, every well-reached cell stays within 1%.
    fitted, base, fit = fitted_on(1.0)
    well = [(b, g, c) for b, g, c, w, _ in fit["decode_cells"] if w >= 100]
    assert well
    for b, g, c in well:
        assert fitted.step_time_s(b, g, c) == pytest.approx(base.step_time_s(b, g, c), rel=0.01)


def test_the_grid_spreads_a_sample_by_the_lookups_weights() -> None:
    grid = RatioGrid([1.0, 3.0], [0.0, 10.0])
    grid.add(np.array([2.0]), np.array([10.0]), np.array([0.5]))
    assert grid.w.tolist() == [[0.0, 0.5], [0.0, 0.5]]
    assert grid.wr.tolist() == [[0.0, 0.25], [0.0, 0.25]]
    # Past the edge, clamped: all its weight on the last cell.
    grid.add(np.array([9.0]), np.array([-4.0]), np.array([1.0]))
    assert grid.w[1, 0] == 1.0
    assert grid.correction()[0, 0] == 1.0
    assert grid.correction()[1, 0] == pytest.approx(np.exp(1.0 / (1.0 + PRIOR_STEPS)))



def test_an_error_growing_along_a_segment_is_fitted_at_both_ends() -> None:
    # Steps cost more than priced by a share growing from 0 at B = 32 to 15% at 64, and
    # most steps sit near 32 (as decode steps on the CPU engine did). A cell's mean of
    # what reached it lets those steps set the 64 cell too (about 1.06); the fit through
    # the lookup's interpolation prices both kinds of step as measured.
    grid = RatioGrid([32.0, 64.0], [0.0])
    truth = {36.0: 2000, 60.0: 200}  # batch size -> steps: enough that the base weighs little
    for b, n in truth.items():
        grid.add(np.full(n, b), np.zeros(n), np.full(n, 0.15 * (b - 32.0) / 32.0))
    f = grid.correction()[:, 0]
    for b in truth:
        a = (b - 32.0) / 32.0
        priced = (1 - a) * f[0] + a * f[1]  # a base of 1 at both cells
        assert priced == pytest.approx(np.exp(0.15 * a), rel=0.015)
    assert f[1] > 1.12

def test_the_fitted_profile_says_what_it_fitted(tmp_path: Path, capsys: Any) -> None:
    base = load_profile(BASE)
    data, _ = fit_profile(list(runs_on(SLOWER)), base, sources=["a", "b"])
    path = tmp_path / "fitted.json"
    path.write_text(json.dumps(data))
    assert main(["profile", "--show", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    fit = data["measured"]["fit"]
    cells = fit["cells"]["decode"]
    assert f"fitted from 2 run folder(s)' steps: cells decode {cells[0]} of {cells[1]}" in out
    assert f"the rest are {base.name}'s" in out


def _sim_folder(tmp_path: Path) -> Path:
    out = tmp_path / "sim-run"
    write_all(ResultSet.build(list(runs_on(SLOWER))[:1], oracle_policy=None), out)
    return out


@pytest.mark.parametrize("args, words", [
    (["--from-run", "RUN", "--base", BASE, "--out", "OUT"], "is a simulated run"),
    (["--from-run", "RUN", "--out", "OUT"], "--from-run needs --base"),
    (["--from-run", "RUN", "--base", BASE], "--from-run needs --out"),
    (["--from-run", "RUN", "--base", BASE, "--model", "m", "--out", "OUT"], "--model does"),
    (["--base", BASE, "--out", "OUT"], "--base and --name only with --from-run"),
    (["--from-run", "RUN", "--base", BASE, "--out", "RUN/summary.csv"], "summary.csv exists"),
])
def test_wrong_fits_are_one_line(tmp_path: Path, capsys: Any, args: list[str],
                                 words: str) -> None:
    run = _sim_folder(tmp_path)
    out = tmp_path / "fitted.json"
    argv = [a.replace("RUN", str(run)).replace("OUT", str(out)) for a in args]
    assert main(["profile", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and words in err
    assert not out.exists()
