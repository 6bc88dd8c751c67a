"""Load a repository script (benchmarks/, tools/, experiments/) as a module, for tests
that check what it computes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: str) -> ModuleType:
    """The script at ``path`` (relative to the repository root, e.g.
    ``"tools/calibrate/fit_vidur.py"``) as a module; its folder is not a package."""
    file = ROOT / path
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
