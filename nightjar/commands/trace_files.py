"""Writing trace files for ``nightjar trace``: explicit JSON (one request per line) or parquet.

The target is checked before any work (:func:`nightjar.results.outdir.check_out_file`:
never a FIFO, a folder or one of the inputs) and written whole or not at all.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.results.outdir import TMP_TAG, plain_file_mode, write_out_file
from nightjar.trace.trace import Trace, trace_to_json


def dumps_trace(obj: dict[str, Any]) -> str:
    """JSON with one request or segment per line: diff-able and still compact."""
    head = {k: v for k, v in obj.items() if k not in ("requests", "segments")}
    key = "requests" if "requests" in obj else "segments"
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}," for k, v in head.items()]
    items = ",\n".join(f"    {json.dumps(r, ensure_ascii=False)}" for r in obj[key])
    return "{\n" + "\n".join(lines) + f'\n  "{key}": [\n{items}\n  ]\n}}\n'


def write_json(real: Path, shown: Path, obj: dict[str, Any]) -> Path:
    """``obj`` to ``real`` (a target :func:`check_out_file` returned); ``shown`` is the
    user's spelling, for messages."""
    write_out_file(real, dumps_trace(obj), shown)
    return shown


def write_trace(real: Path, shown: Path, trace: Trace, fmt: str) -> Path:
    """``trace`` as an explicit JSON trace or a parquet one (``--format``)."""
    if fmt != "parquet":
        return write_json(real, shown, trace_to_json(trace))
    from nightjar.trace.columnar import write_trace_parquet

    # Beside the target, renamed over it when complete: never half a file.
    fd, name = tempfile.mkstemp(prefix=f".{real.name[:100]}{TMP_TAG}", dir=real.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write_trace_parquet(trace, tmp)
        os.chmod(tmp, plain_file_mode())
        os.replace(tmp, real)
    except OSError as exc:
        raise NightjarInputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return shown


def check_format(fmt: str) -> None:
    """Fail on a format this machine cannot write before reading any input."""
    if fmt == "parquet":
        from nightjar.trace.columnar import require_pyarrow

        require_pyarrow()
