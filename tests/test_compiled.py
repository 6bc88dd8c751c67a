"""The install under test is built as scripts/test.sh says it is: its two runs of the
suite set NIGHTJAR_EXPECT_COMPILED (0: the editable install, the Python sources; 1: a
regular install, whose step loop mypyc compiled). The golden tests then hold the
compiled step loop to the sources' output byte for byte."""

from __future__ import annotations

import ast
import copy
import importlib
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from nightjar.profile.profile import DEFAULT_PROFILE, load_profile
from nightjar.sim import COMPILED, SimConfig, engine, simulate
from nightjar.trace.trace import Trace

ROOT = Path(__file__).resolve().parents[1]


def test_the_step_loop_is_built_as_expected() -> None:
    expected = os.environ.get("NIGHTJAR_EXPECT_COMPILED")
    if expected is None:
        pytest.skip("NIGHTJAR_EXPECT_COMPILED is not set (scripts/test.sh sets it)")
    assert expected in {"0", "1"}
    assert COMPILED is (expected == "1"), engine.__file__


def test_version_names_the_build() -> None:
    # Run away from the checkout: its nightjar/ would shadow a regular install's.
    out = subprocess.run([sys.executable, "-m", "nightjar.cli", "--version"],
                         capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    build = "compiled with mypyc" if COMPILED else "pure Python"
    assert out.stdout.startswith("nightjar ") and f"(simulator: {build})" in out.stdout


def _compiled_modules() -> list[str]:
    """setup.py's ``COMPILED``, read without running the build."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMPILED":
            paths = ast.literal_eval(node.value)
            return [p.removesuffix(".py").replace("/", ".") for p in paths]
    raise AssertionError("setup.py has no COMPILED list")


def test_every_listed_module_is_built_as_the_step_loop_is() -> None:
    modules = _compiled_modules()
    assert "nightjar.sim.engine" in modules
    for name in modules:
        module = importlib.import_module(name)
        # A regular install loads each listed module's C build; an editable one none.
        assert (module.__file__ or "").endswith(".py") is not COMPILED, module.__file__


def test_what_crosses_a_process_pickles_and_copies() -> None:
    """A run's config (its memory settings included), a profile and a result pickle and
    deep-copy in both builds (a compiled class would refuse: setup.py). A policy is a
    run's state, built in the process that runs it from its spec (a sweep sends specs)."""
    profile = load_profile(DEFAULT_PROFILE)
    cfg = SimConfig(seed=3)
    rng = np.random.default_rng(0)
    n = 30
    trace = Trace(
        name="tiny", seed=0, arrival_s=np.cumsum(rng.exponential(0.2, n)),
        prompt_tokens=rng.integers(8, 200, n), output_tokens=rng.integers(1, 40, n),
        workload=np.array(["sharegpt"] * n, dtype=object), acceptance=np.full(n, np.nan),
        prompts=None,
    )
    result = simulate(trace, profile, "nightjar+", cfg)
    for value in (cfg, profile, result):
        for copied in (pickle.loads(pickle.dumps(value)), copy.deepcopy(value)):
            assert type(copied) is type(value)
    assert pickle.loads(pickle.dumps(cfg)) == cfg == copy.deepcopy(cfg)
    again = pickle.loads(pickle.dumps(profile))
    assert again.step_time_s(8, 3, 512.0) == profile.step_time_s(8, 3, 512.0)
    assert pickle.loads(pickle.dumps(result)).requests == result.requests
