"""The suite runs twice (scripts/test.sh): against the Python sources (the editable
install) and against a regular install whose step loop mypyc compiled (setup.py). A
compiled class refuses new attributes and patched methods, so the few tests that spy
on the simulator that way run against the sources only."""

from __future__ import annotations

import pytest

from nightjar.sim import COMPILED

patches_the_simulator = pytest.mark.skipif(
    COMPILED, reason="patches the simulator's methods, which its compiled classes refuse; "
    "runs against the Python sources (the editable install)"
)
