"""Writing trace files for ``nightjar trace``: explicit JSON (one request per line) or parquet."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.trace.model import Trace, trace_to_json


def dumps_trace(obj: dict[str, Any]) -> str:
    """JSON with one request or segment per line: diff-able and still compact."""
    head = {k: v for k, v in obj.items() if k not in ("requests", "segments")}
    key = "requests" if "requests" in obj else "segments"
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    items = ",\n".join(f"    {json.dumps(r, ensure_ascii=False)}" for r in obj[key])
    return "{\n" + "\n".join(lines) + f'\n  "{key}": [\n{items}\n  ]\n}}\n'


def check_out(path: Path, force: bool) -> None:
    """Refuse to write over a file without --force, or onto anything but a file."""
    if path.exists() and not path.is_file():  # a FIFO would block the write forever
        raise NightjarInputError(f"cannot write {path}: it exists and is not a regular file")
    if path.exists() and not force:
        raise NightjarInputError(f"{path} exists; pass --force to overwrite it")


def write_json(path_str: str, obj: dict[str, Any], force: bool) -> Path:
    path = Path(path_str)
    check_out(path, force)
    try:
        path.write_text(dumps_trace(obj), encoding="utf-8")
    except OSError as exc:
        raise NightjarInputError(f"cannot write {path}: {exc}") from None
    return path


def write_trace(path_str: str, trace: Trace, fmt: str, force: bool) -> Path:
    """``trace`` as an explicit JSON trace or a parquet one (``--format``)."""
    if fmt == "parquet":
        from nightjar.trace.columnar import write_trace_parquet

        path = Path(path_str)
        check_out(path, force)
        return write_trace_parquet(trace, path)
    return write_json(path_str, trace_to_json(trace), force)


def check_format(fmt: str) -> None:
    """Fail on a format this machine cannot write before reading any input."""
    if fmt == "parquet":
        from nightjar.trace.columnar import require_pyarrow

        require_pyarrow()
