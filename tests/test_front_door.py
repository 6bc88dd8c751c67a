"""One front door (nightjar.run): a setting written once reaches every entry point, and
every entry point prepares a run the same way."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd

import nightjar
from nightjar.cli import main

ROOT = Path(__file__).resolve().parents[1]
# The repository's own measured profile (the tiny CPU pair; its table stops at gamma 3,
# under the default gamma_max 4).
MEASURED = ROOT / "reports" / "simulator" / "agreement-20261203d" / "profile.json"


def test_the_api_and_nightjar_sim_agree_on_the_measured_profile(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert main(["sim", "--trace", "live-spec-wins", "--profile", str(MEASURED),
                 "--out", str(out), "--quiet", "--no-report"]) == 0
    cli = pd.read_csv(out / "summary.csv").set_index("policy")
    api = nightjar.simulate("live-spec-wins", str(MEASURED)).frame().set_index("policy")
    assert list(api.index) == list(cli.index)
    assert "fixed:3" in api.index and "fixed:4" not in api.index  # gamma_max followed the table
    for column in ("throughput_tok_s", "e2e_s_mean", "tpot_s_mean", "mean_gamma"):
        pd.testing.assert_series_equal(api[column], cli[column], check_exact=False, rtol=1e-9)


# Run in a fresh interpreter: the new field must be in place before the entry points
# are imported, as it would be had it been written in nightjar/run/config.py.
PROBE = """
import dataclasses, inspect
from dataclasses import field
import nightjar.run.config as rc
import nightjar.sim.knobs as knobs


@dataclasses.dataclass(frozen=True)
class WithProbe(rc.RunConfig):
    probe_knob: int = field(default=7, metadata=rc._flag("--probe-knob", "one more setting"))


@dataclasses.dataclass(frozen=True, slots=True)
class KnobsWithProbe(knobs.SimConfig):
    probe_knob: int = 0


rc.RunConfig = WithProbe
knobs.SimConfig = KnobsWithProbe

import nightjar.api, nightjar.run.prepare as front
from nightjar.cli import build_parser
from nightjar.commands import sim
from nightjar.sweep.cell import Cell
from nightjar.sweep.spec import AXES, build_spec

# nightjar sim: a flag with the field's default, reaching the simulator's knobs.
args = build_parser().parse_args(["sim", "--trace", "steady_low", "--policy", "nospec",
                                  "--probe-knob", "9"])
assert build_parser().parse_args(["sim"]).probe_knob == 7
assert sim._plan(args).knobs.probe_knob == 9

# nightjar.simulate: a keyword with the field's default, reaching the knobs.
assert inspect.signature(nightjar.api.simulate).parameters["probe_knob"].default == 7
seen = []
real = front.prepare
front.prepare = lambda *a, **k: seen.append(real(*a, **k)) or seen[-1]
nightjar.api.simulate("steady_low", policies="nospec", oracle=False, probe_knob=5)
assert seen[0].knobs.probe_knob == 5

# nightjar sweep: an axis with the field's default, a column of the table, the knobs.
assert AXES["probe_knob"] == (int, (7,))
cell = build_spec({"policy": ["nospec"], "probe_knob": [3]}).cells()[0]
assert cell.params()["probe_knob"] == 3 and "probe_knob" in Cell.columns()
assert cell.run_config().sim_config("draft_model").probe_knob == 3
print("reached every entry point")
"""


def test_a_setting_written_once_reaches_every_entry_point() -> None:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "reached every entry point" in done.stdout
