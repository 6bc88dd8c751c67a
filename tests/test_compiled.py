"""The install under test is built as scripts/test.sh says it is: its two runs of the
suite set NIGHTJAR_EXPECT_COMPILED (0: the editable install, the Python sources; 1: a
regular install, whose step loop mypyc compiled). The golden tests then hold the
compiled step loop to the sources' output byte for byte."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from nightjar.sim import COMPILED, engine


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
