"""The package's layers (docs/architecture.md), checked from the source's imports.

Imports under ``if TYPE_CHECKING:`` never count. The circle and layer rules count
every other import, deferred ones inside functions too (a deferred import is how the
CLI keeps simpy and plotly out of ``nightjar --help``, not a way around a layer). What
a module loads when imported (:func:`closure`) follows import-time imports only.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "nightjar"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in ROOT.rglob("*.py")}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _import_nodes(body: list[ast.stmt], deep: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _import_nodes(node.body, deep)
            yield from _import_nodes(node.orelse, deep)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody,
                          *(h.body for h in node.handlers)):
                yield from _import_nodes(block, deep)
        elif isinstance(node, ast.With) or (deep and isinstance(node, _SCOPES)):
            yield from _import_nodes(node.body, deep)


def imports_of(module: str, deep: bool = False) -> set[str]:
    """Every module ``module`` imports (ours resolved to a module, others by top name)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in _import_nodes(tree.body, deep):
        if isinstance(node, ast.Import):
            out.update(a.name if a.name.startswith("nightjar") else a.name.split(".")[0]
                       for a in node.names)
        elif node.level == 0 and node.module:
            if not node.module.startswith("nightjar"):
                out.add(node.module.split(".")[0])
                continue
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.add(sub if sub in MODULES else node.module)
    return out


def _ours(names: set[str]) -> set[str]:
    return {n for n in names if n in MODULES}


def closure(module: str) -> set[str]:
    """What importing ``module`` loads: ours transitively, plus third-party top names."""
    seen: set[str] = set()
    todo = [module]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        if m in MODULES:
            todo.extend(imports_of(m))
    return seen - {module}


def test_there_is_no_import_circle() -> None:
    graph = {m: _ours(imports_of(m, deep=True)) for m in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                circles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert circles == []


def _family(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


# Which families each family may import (besides itself and the leaf helpers).
# Leaves: small helpers every layer may use (errors, safe reading, typed value checks,
# signals as interrupts); they import nothing of ours but each other.
LEAVES = {"nightjar", "nightjar.errors", "nightjar.reading", "nightjar.checks",
          "nightjar.interrupts"}
ALLOWED = {
    "core": set(),
    "policies": {"core"},
    "trace": set(),
    "profile": {"core"},
    "roofline": {"profile", "core"},
    "results": {"core"},
    "report": {"core", "results"},
    "sim": {"core", "policies", "profile", "trace"},
    "live": {"core", "policies", "profile", "trace"},
    # The front door prepares simulator runs; the sim-vs-live check replays live runs
    # in the simulator (never importing live: it reads the runs' folders).
    "run": {"core", "policies", "profile", "trace", "results", "sim"},
    "fidelity": {"core", "policies", "profile", "trace", "results", "sim"},
}


@pytest.mark.parametrize("family", sorted(ALLOWED))
def test_a_family_imports_only_the_layers_below_it(family: str) -> None:
    allowed = ALLOWED[family] | {family}
    broken = {
        (m, dep)
        for m in MODULES if _family(m) == family
        for dep in _ours(imports_of(m, deep=True))
        if dep not in LEAVES and _family(dep) not in allowed
    }
    assert broken == set()


def test_the_engines_never_import_each_other_nor_the_validator() -> None:
    for m in MODULES:
        deps = {_family(d) for d in _ours(imports_of(m, deep=True))}
        if _family(m) == "sim":
            assert "live" not in deps, m
        if _family(m) == "live":
            assert not deps & {"sim", "fidelity"}, m


def test_the_live_plugins_load_neither_pandas_nor_plotly() -> None:
    # vLLM loads these classes in every engine process; the step path stays lean.
    plugins = [m for m in MODULES if m.startswith("nightjar.live.plugins.")]
    assert plugins
    for module in plugins:
        assert not closure(module) & {"pandas", "plotly", "nightjar.fidelity.compare"}, module


def test_importing_the_core_loads_no_engine() -> None:
    for module in (m for m in MODULES if _family(m) == "core"):
        assert not closure(module) & {"simpy", "vllm", "torch", "pandas", "plotly"}, module


def test_at_most_a_dozen_modules_sit_at_the_top() -> None:
    top = [p.name for p in ROOT.glob("*.py")]
    assert len(top) <= 12, sorted(top)


def test_nothing_in_live_points_back_up_at_the_plugins() -> None:
    # plugins/ holds what vLLM loads; the wire types, the engine spec and the run
    # switch sit below it, so the caller's side never reaches into the plugins.
    broken = {
        (m, dep)
        for m in MODULES
        if m.startswith("nightjar.live.") and not m.startswith("nightjar.live.plugins")
        for dep in _ours(imports_of(m, deep=True))
        if dep.startswith("nightjar.live.plugins")
    }
    assert broken == set()


def test_no_two_top_level_names_differ_only_by_a_plural() -> None:
    names = {p.stem for p in ROOT.iterdir()
             if p.name != "__pycache__" and not p.name.startswith(".")}
    assert not {n for n in names if n + "s" in names}


# The same basename twice is allowed only where it names the same thing seen from
# another room (the benchmark's results and report; acceptance's estimate and its draws).
# A command module is named for its sub-command, so commands/ is not counted.
SHARED_BASENAMES = {"bench.py", "acceptance.py", "drafters.py", "ops.py", "runner.py"}


def test_a_module_name_means_one_thing() -> None:
    seen: dict[str, list[str]] = {}
    for path in ROOT.rglob("*.py"):
        if path.name != "__init__.py" and path.parent.name != "commands":
            seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    twice = {name: paths for name, paths in seen.items()
             if len(paths) > 1 and name not in SHARED_BASENAMES}
    assert twice == {}


# The profile format has one writer, nightjar/profile/document.py (docs/profiles.md):
# elsewhere no code lays out a profile document's keys by hand. A document is known by
# its version next to a key only profiles have, or by one of its tables (no other file
# or setting of ours has these keys). nightjar/schemas/ names every key of the format to
# describe it in the JSON Schema; it writes no document.
_PROFILE_ONLY_KEYS = {"source", "command", "notes", "gpu", "target", "draft", "hardware",
                      "roofline", "measured", "memory", "decode", "draft_forward", "prefill",
                      "mixed", "wake", "acceptance", "drafter"}
_PROFILE_TABLES = {"decode", "draft_forward", "prefill", "mixed", "wake"}
_DESCRIBES_THE_PROFILE_FORMAT = {"nightjar.schemas"}


def _keys_written(node: ast.AST) -> set[str]:
    """String keys ``node`` writes into a dict: a literal, ``dict(k=...)``,
    ``d.update(k=...)``, ``d.setdefault("k", ...)`` or ``d["k"] = ...``."""
    if isinstance(node, ast.Dict):
        return {k.value for k in node.keys if isinstance(k, ast.Constant)
                and isinstance(k.value, str)}
    if isinstance(node, ast.Call):
        f = node.func
        if (isinstance(f, ast.Name) and f.id == "dict") or (
                isinstance(f, ast.Attribute) and f.attr in ("update", "setdefault")):
            keys = {k.arg for k in node.keywords if k.arg is not None}
            if isinstance(f, ast.Attribute) and f.attr == "setdefault" and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and isinstance(first.value, str):
                    keys.add(first.value)
            return keys
    if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
            and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str)):
        return {node.slice.value}
    return set()


def hand_written_profile_keys(source: str) -> list[str]:
    """``line: keys`` for each place ``source`` writes a profile document's keys."""
    found = []
    for node in ast.walk(ast.parse(source)):
        keys = _keys_written(node)
        if ("format_version" in keys and keys & _PROFILE_ONLY_KEYS) or keys & _PROFILE_TABLES:
            found.append(f"{getattr(node, 'lineno', 0)}: {sorted(keys)}")
    return found


def test_the_detector_knows_a_profile_document_written_by_hand() -> None:
    assert hand_written_profile_keys('d = {"format_version": 1, "source": "measured"}')
    assert hand_written_profile_keys('d["mixed"] = rows')
    assert hand_written_profile_keys('d.update(draft_forward=rows)')
    assert not hand_written_profile_keys('t = {"format_version": 1, "name": "a trace"}')


def test_only_the_profile_family_writes_a_profile_document() -> None:
    written = {
        m: found for m, path in MODULES.items()
        if _family(m) != "profile" and m not in _DESCRIBES_THE_PROFILE_FORMAT
        and (found := hand_written_profile_keys(path.read_text(encoding="utf-8")))
    }
    assert written == {}, "write profiles through nightjar.profile.document"


def test_both_profile_writers_go_through_the_document_module() -> None:
    roofline = set().union(*(imports_of(m, deep=True) for m in MODULES
                             if _family(m) == "roofline"))
    assert "nightjar.profile.document" in roofline
    assert "nightjar.profile.document" in imports_of("nightjar.live.profiling.profiler")
    # One format version, defined once in the profile family.
    defines = [m for m in MODULES if _family(m) == "profile" and any(
        isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "FORMAT_VERSION" for t in node.targets)
        for node in ast.parse(MODULES[m].read_text(encoding="utf-8")).body)]
    assert defines == ["nightjar.profile.format"]

# The command line (nightjar/commands/): one module per sub-command, named as
# nightjar.cli.COMMANDS names it, with its own helpers beside it as <command>_*.py and
# the flag helpers every command may share; the rules live in the packages below.
COMMANDS_DIR = ROOT / "commands"
SHARED_FLAG_HELPERS = {"slo_args", "run_flags"}
MAX_COMMAND_LINES = 400


def _command_modules() -> dict[str, Path]:
    return {p.stem: p for p in COMMANDS_DIR.glob("*.py") if p.name != "__init__.py"}


def _owner(stem: str) -> str | None:
    """The sub-command a commands/ module belongs to (None: a shared flag helper)."""
    from nightjar.cli import COMMANDS

    if stem in SHARED_FLAG_HELPERS:
        return None
    if stem in COMMANDS:
        return stem
    owners = [c for c in COMMANDS if stem.startswith(c + "_")]
    assert owners, f"commands/{stem}.py is neither a sub-command, its helper nor a flag helper"
    return owners[0]


def test_every_command_file_is_short() -> None:
    # A command parses flags and calls the packages; a long one holds rules that
    # belong below it (docs/architecture.md).
    long = {stem: n for stem, p in _command_modules().items()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) >= MAX_COMMAND_LINES}
    assert long == {}


def test_a_command_imports_only_the_flag_helpers_and_its_own_helpers() -> None:
    broken = set()
    for stem in _command_modules():
        owner = _owner(stem)
        for dep in _ours(imports_of(f"nightjar.commands.{stem}", deep=True)):
            if not dep.startswith("nightjar.commands.") or dep == f"nightjar.commands.{stem}":
                continue
            other = dep.removeprefix("nightjar.commands.")
            if other not in SHARED_FLAG_HELPERS and (owner is None or _owner(other) != owner):
                broken.add((stem, other))
    assert broken == set()


def test_the_sub_command_modules_are_the_cli_s_commands() -> None:
    from nightjar.cli import COMMANDS

    defining = {stem for stem, p in _command_modules().items()
                if any(isinstance(n, ast.FunctionDef) and n.name == "add_parser"
                       for n in ast.parse(p.read_text(encoding="utf-8")).body)}
    assert defining == set(COMMANDS)
    assert len(COMMANDS) == len(set(COMMANDS))


def test_the_architecture_doc_names_every_family_and_only_files_that_exist() -> None:
    """docs/architecture.md's family table: a row per family folder, and every module
    a row names (`name.py`) is a file of that family, so a move cannot leave it stale."""
    doc = (ROOT.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `nightjar/(\w+)/` \| (.*) \|$", doc, flags=re.M))
    package = ROOT
    families = {d.name for d in package.iterdir() if (d / "__init__.py").exists()}
    assert families <= set(rows), sorted(families - set(rows))
    for family, text in rows.items():
        files = {p.name for p in (package / family).rglob("*.py")}
        named = set(re.findall(r"`([\w/]*?(\w+\.py))`", text))
        outside = ("tests/", "docs/", "scripts/", "benchmarks/", "tools/")
        missing = sorted(full for full, name in named
                         if name not in files and not full.startswith(outside))
        assert not missing, (family, missing)
