"""Builds nightjar, with the simulator's step loop compiled by mypyc where it can be.

Everything but the build lives in pyproject.toml. The modules in :data:`COMPILED` run
once or more per simulated step; mypyc turns them into C extensions (the same code,
type-checked), 1.5-1.6x faster on benchmarks/sim_speed.py and sweep_speed.py. The
Python sources stay in the package and run where nothing was compiled.
``NIGHTJAR_COMPILE``:

- unset: compile a regular install (``pip install .``), not an editable one
  (``pip install -e .``): there an edited source would hide behind its stale build;
- ``1``: compile, and fail the build where that fails;
- ``0``: never compile.

Where the unset default cannot compile (no C compiler), the build warns and installs
the pure-Python package.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

# The step loop and what it calls every step. Not compiled: modules whose classes are
# runtime-checkable protocols (mypyc cannot build those), and everything off the hot path.
COMPILED = [
    "nightjar/core/admission.py",
    "nightjar/core/driver.py",
    "nightjar/core/estimators.py",
    "nightjar/core/memory.py",
    "nightjar/core/ridge.py",
    "nightjar/policies/dsd.py",
    "nightjar/policies/lag.py",
    "nightjar/policies/nightjar_plus.py",
    "nightjar/policies/step_times.py",
    "nightjar/profile/model.py",
    "nightjar/sim/batch.py",
    "nightjar/sim/bound.py",
    "nightjar/sim/chunk.py",
    "nightjar/sim/draft.py",
    "nightjar/sim/engine.py",
    "nightjar/sim/kv.py",
    "nightjar/sim/ledger.py",
    "nightjar/sim/no_draft.py",
    "nightjar/sim/price.py",
    "nightjar/sim/yardstick.py",
]
# The setup.py commands that build (the others only want metadata).
BUILDS = {"build", "build_ext", "bdist_wheel", "install", "editable_wheel"}
# The type check mypyc builds on, the same wherever it runs: numpy's own types (a build
# requirement, pyproject.toml), every other dependency's as Any (the build's isolated
# environment has none of them), none of the project's strict settings (they would
# refuse those Anys), and no cache another environment's check could have left.
MYPY_OPTIONS = ["--config-file", "", "--ignore-missing-imports", "--python-version", "3.11",
                "--cache-dir", os.devnull]


class OptionalBuildExt(build_ext):  # type: ignore[misc]
    """Falls back to the pure-Python package when the C build fails (unless required)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # any compiler or linker failure
            if os.environ.get("NIGHTJAR_COMPILE") == "1":
                raise
            # A half-built set (the shared library missing under a module's stub)
            # would fail at import: take every output away.
            for ext in self.extensions:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            print(f"warning: nightjar's simulator is not compiled ({exc}); "
                  "it runs from the Python sources, about 1.6x slower", file=sys.stderr)


def ext_modules() -> list[Any]:
    mode = os.environ.get("NIGHTJAR_COMPILE", "")
    if mode == "0" or (mode != "1" and "editable_wheel" in sys.argv):
        return []
    if not BUILDS.intersection(sys.argv):
        return []  # metadata only (pip runs this file three times for one wheel)
    try:
        from mypyc.build import mypycify

        return list(mypycify([*MYPY_OPTIONS, *COMPILED], opt_level="3", debug_level="0"))
    except (Exception, SystemExit) as exc:  # mypyc missing, or its type check refused
        if mode == "1":
            raise
        print(f"warning: nightjar's simulator is not compiled ({exc!r})", file=sys.stderr)
        return []


setup(ext_modules=ext_modules(), cmdclass={"build_ext": OptionalBuildExt})
