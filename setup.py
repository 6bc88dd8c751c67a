"""Builds nightjar, with the simulator's step loop compiled by mypyc where it can be.

Everything but the build lives in pyproject.toml. The modules in :data:`COMPILED` run
once or more per simulated step; mypyc turns them into C extensions (the same code,
type-checked), about 1.5x faster on benchmarks/sim_speed.py and sweep_speed.py. The
Python sources stay in the package and run where nothing was compiled.
``NIGHTJAR_COMPILE``:

- unset: compile a regular install (``pip install .``);
- ``1``: compile, and fail the build where that fails;
- ``0``: never compile.

An editable install (``pip install -e .``) is never compiled: there an edited source
would hide behind its stale build.

Where the unset default cannot compile (no C compiler), the build warns and installs
the pure-Python package.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

# The step loop and what it calls every step. Not compiled: modules with a
# runtime-checkable protocol (mypyc cannot build one); those whose values a user or a
# sweep pickles or copies (a compiled class cannot rebuild itself without arguments):
# the profile (nightjar/profile/profile.py) and the memory settings of every run's
# config (nightjar/core/memory.py); the acceptance draws (nightjar/sim/acceptance.py:
# mypyc takes numpy's stub for Generator.random(n) as a float and refuses the array it
# returns; the draws are numpy calls, which compiling would not speed up); and
# everything off the hot path. (A compiled
# policy does not pickle either: a policy is built from its spec where it runs.)
COMPILED = [
    "nightjar/core/acceptance.py",
    "nightjar/core/admission.py",
    "nightjar/core/driver.py",
    "nightjar/core/estimators.py",
    "nightjar/policies/dsd.py",
    "nightjar/policies/lag.py",
    "nightjar/policies/nightjar_plus.py",
    "nightjar/policies/step_times.py",
    "nightjar/sim/batch.py",
    "nightjar/sim/bound.py",
    "nightjar/sim/chunk.py",
    "nightjar/sim/draft.py",
    "nightjar/sim/engine.py",
    "nightjar/sim/kv.py",
    "nightjar/sim/ledger.py",
    "nightjar/sim/no_draft.py",
    "nightjar/sim/price.py",
    "nightjar/sim/waiting.py",
    "nightjar/sim/yardstick.py",
]
# The setup.py commands that build (the others only want metadata).
BUILDS = {"build", "build_ext", "bdist_wheel", "install"}
# The type check mypyc builds on, the same wherever it runs: numpy's own types (a build
# requirement, pyproject.toml), every other dependency's as Any (the build's isolated
# environment has none of them), none of the project's strict settings (they would
# refuse those Anys), and no cache another environment's check could have left.
MYPY_OPTIONS = ["--config-file", "", "--ignore-missing-imports", "--python-version", "3.11",
                "--cache-dir", os.devnull]


class FreshBuildPy(build_py):  # type: ignore[misc]
    """Clears the C builds an earlier install left in build/ before the sources are
    copied there: a module since taken off COMPILED, an older shared library, or a
    whole compiled set under ``NIGHTJAR_COMPILE=0`` would otherwise ship in the wheel,
    shadowing the sources they were built from. build_ext then builds afresh."""

    def run(self) -> None:
        for suffix in EXTENSION_SUFFIXES:
            for stale in Path(self.build_lib).rglob(f"*{suffix}"):
                stale.unlink()
        super().run()


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
                  "it runs from the Python sources, about 1.5x slower", file=sys.stderr)


def ext_modules() -> list[Any]:
    mode = os.environ.get("NIGHTJAR_COMPILE", "")
    if mode == "0" or "editable_wheel" in sys.argv:
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


setup(ext_modules=ext_modules(),
      cmdclass={"build_py": FreshBuildPy, "build_ext": OptionalBuildExt})
