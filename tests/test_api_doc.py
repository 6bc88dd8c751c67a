"""docs/api.md's example runs as written (every ```python block, in order)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_api_doc_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks, "docs/api.md has no python example"
    monkeypatch.chdir(tmp_path)  # the example writes "run" and "sweep" folders
    namespace: dict[str, object] = {"__name__": "__api_doc__"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    assert (tmp_path / "run" / "summary.csv").is_file()
    assert (tmp_path / "sweep" / "results.csv").is_file()
