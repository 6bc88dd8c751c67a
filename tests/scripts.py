"""Load a repository script (benchmarks/, tools/, experiments/) as a module, for tests
that check what it computes."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(path: str, *siblings: str) -> ModuleType:
    """The script at ``path`` (relative to the repository root, e.g.
    ``"tools/calibrate/fit_vidur.py"``) as a module; its folder is not a package.

    ``siblings`` names the scripts of the same folder it imports by name (``"paper_cells"``):
    they are loaded first and registered under that name, as running the script from its
    folder would find them.
    """
    file = ROOT / path
    for name in siblings:
        if name not in sys.modules:
            sys.modules[name] = load_script(str(Path(path).parent / f"{name}.py"))
    spec = importlib.util.spec_from_file_location(file.stem, file)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs, as an import would: a dataclass resolves its
    # annotations through sys.modules[its module].
    sys.modules.setdefault(file.stem, module)
    spec.loader.exec_module(module)
    return module
