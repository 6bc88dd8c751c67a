"""docs/api.md's example runs as written (every ```python block, in order)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "api.md"


def python_blocks(path: Path) -> list[str]:
    """Every ```python block of a Markdown file, dedented (the README's is in a list)."""
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", path.read_text(),
                                                    flags=re.S)]


def test_api_doc_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(DOC)
    assert blocks, "docs/api.md has no python example"
    monkeypatch.chdir(tmp_path)  # the example writes "run" and "sweep" folders
    namespace: dict[str, object] = {"__name__": "__api_doc__"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    assert (tmp_path / "run" / "summary.csv").is_file()
    assert (tmp_path / "sweep" / "results.csv").is_file()


def test_readme_tour_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (block,) = python_blocks(REPO / "README.md")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    exec(compile(block, "README.md", "exec"), namespace)
    # The oracle runs by default, as in `nightjar sim` (one set of defaults).
    again = [r.policy for r in namespace["again"]]  # type: ignore[attr-defined]
    assert again == ["nospec", "fixed:3", "nightjar+", "oracle"]
