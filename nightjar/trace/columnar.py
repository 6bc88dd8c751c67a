"""The columnar trace format: one parquet file, one row per request.

A JSON trace of a real log is about 100 bytes a request (a 27M-request week would be
2.7 GB); parquet stores the same columns in a few bytes each and loads without a
per-request parse. Columns (docs/traces.md): ``arrival_s`` (float64, seconds),
``prompt_tokens`` and ``output_tokens`` (int64), and optionally ``workload``
(string), ``acceptance`` (float64, NaN = drawn from the workload), ``prompt``
(string) and ``speculate`` (bool). The trace's ``name``, ``description``, ``seed``,
``duration_s`` and ``format_version`` live in the file's key-value metadata under
``nightjar``. Every column is checked as a whole on load, with the same rules as the
JSON format; the first bad row is named. Needs pyarrow (``pip install pyarrow``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from nightjar.errors import NightjarInputError
from nightjar.trace.schema import DEFAULT_WORKLOAD, FORMAT_VERSION, MAX_SEED
from nightjar.trace.workloads import MAX_TOKENS, WORKLOADS

MAGIC = b"PAR1"
META_KEY = b"nightjar"

if TYPE_CHECKING:  # model.load_trace reads through this module, so no import back
    from nightjar.trace.trace import Trace
REQUIRED = ("arrival_s", "prompt_tokens", "output_tokens")
OPTIONAL = ("workload", "acceptance", "prompt", "speculate")


def is_parquet(path: Path) -> bool:
    """Whether ``path`` is a regular file that starts like a parquet file."""
    try:
        if not path.is_file():
            return False
        with path.open("rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return False


def require_pyarrow() -> Any:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise NightjarInputError(
            "parquet traces need pyarrow: pip install pyarrow (or 'nightjar[cluster]')"
        ) from None
    return pyarrow


def write_trace_parquet(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as a parquet trace (reads back equal, arrival times exact)."""
    pa = require_pyarrow()
    path = Path(path)
    cols: dict[str, Any] = {
        "arrival_s": pa.array(trace.arrival_s, type=pa.float64()),
        "prompt_tokens": pa.array(trace.prompt_tokens, type=pa.int64()),
        "output_tokens": pa.array(trace.output_tokens, type=pa.int64()),
        "workload": pa.array(trace.workload.astype(str), type=pa.string()),
        "acceptance": pa.array(trace.acceptance, type=pa.float64()),
    }
    if trace.prompts is not None:
        if any(p is not None and not isinstance(p, str) for p in trace.prompts):
            raise NightjarInputError(
                f"cannot write {path}: parquet traces keep prompt text, not token ids"
            )
        cols["prompt"] = pa.array(trace.prompts, type=pa.string())
    if trace.speculate is not None:
        cols["speculate"] = pa.array(trace.speculate.astype(bool), type=pa.bool_())
    meta = {"format_version": FORMAT_VERSION, "name": trace.name,
            "description": trace.description, "seed": trace.seed,
            "duration_s": trace.duration_s}
    table = pa.table(cols).replace_schema_metadata({META_KEY: json.dumps(meta).encode()})
    try:
        pa.parquet.write_table(table, path)
    except OSError as exc:
        raise NightjarInputError(f"cannot write {path}: {exc}") from None
    return path


def _first_bad(bad: np.ndarray, source: str, what: str) -> None:
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise NightjarInputError(f"{source}: row {i}: {what}")


def _numeric(table: Any, name: str, source: str, integer: bool) -> np.ndarray:
    col = table.column(name)
    kind = str(col.type)
    ok = kind.startswith(("int", "uint")) if integer else kind.startswith(
        ("double", "float", "int", "uint", "halffloat"))
    if not ok:
        raise NightjarInputError(
            f"{source}: column {name} is {kind}, not {'an integer' if integer else 'a number'}"
        )
    if col.null_count and name != "acceptance":
        first = int(np.flatnonzero(np.asarray(col.is_null()))[0])
        raise NightjarInputError(f"{source}: row {first}: {name} is missing")
    if integer:
        return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.int64)
    return np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)


def read_trace_parquet(path: str | Path, seed: int | None = None) -> dict[str, Any]:
    """A parquet trace's :class:`~nightjar.trace.trace.Trace` fields, checked column by
    column (``seed`` overrides the recorded one)."""
    pa = require_pyarrow()
    path = Path(path)
    source = str(path)
    try:
        table = pa.parquet.read_table(path)
    except (OSError, ValueError, pa.ArrowException) as exc:
        raise NightjarInputError(f"{source}: cannot read parquet trace ({exc})") from None
    names = set(table.column_names)
    missing = [c for c in REQUIRED if c not in names]
    if missing:
        raise NightjarInputError(
            f"{source}: missing column(s) {', '.join(missing)} (need {', '.join(REQUIRED)})"
        )
    unknown = sorted(names - set(REQUIRED) - set(OPTIONAL))
    if unknown:
        raise NightjarInputError(f"{source}: unknown column {unknown[0]!r}")
    if table.num_rows == 0:
        raise NightjarInputError(f"{source}: empty trace (no rows)")
    meta = _metadata(table, source)
    arrival = _numeric(table, "arrival_s", source, integer=False)
    prompt = _numeric(table, "prompt_tokens", source, integer=True)
    output = _numeric(table, "output_tokens", source, integer=True)
    _first_bad(~np.isfinite(arrival) | (arrival < 0), source,
               "arrival_s must be a finite number >= 0")
    for name, values in (("prompt_tokens", prompt), ("output_tokens", output)):
        _first_bad((values < 1) | (values > MAX_TOKENS), source,
                   f"{name} must be in 1..{MAX_TOKENS}")
    n = len(arrival)
    workload = _strings(table, "workload", source, n)
    if workload is None:
        workload = np.full(n, DEFAULT_WORKLOAD, dtype=object)
    known = np.isin(workload, list(WORKLOADS))
    _first_bad(~known, source, f"unknown workload (known: {', '.join(sorted(WORKLOADS))})")
    acceptance = (_numeric(table, "acceptance", source, integer=False)
                  if "acceptance" in names else np.full(n, np.nan))
    _first_bad(~np.isnan(acceptance) & ((acceptance < 0) | (acceptance >= 1)), source,
               "acceptance must be empty (NaN) or in [0, 1)")
    prompts = _strings(table, "prompt", source, n, allow_null=True)
    speculate = None
    if "speculate" in names:
        col = table.column("speculate")
        if str(col.type) != "bool" or col.null_count:
            raise NightjarInputError(f"{source}: column speculate must be true/false, no gaps")
        flags = np.asarray(col.to_numpy(zero_copy_only=False), dtype=bool)
        speculate = None if flags.all() else flags
    order = np.argsort(arrival, kind="stable")
    duration = meta.get("duration_s")
    span = float(duration) if isinstance(duration, int | float) else None
    if span is not None and (not math.isfinite(span) or span < float(arrival.max())):
        raise NightjarInputError(f"{source}: duration_s {duration} is before the last arrival")
    return dict(
        name=str(meta.get("name", path.stem)),
        seed=int(meta.get("seed", 0)) if seed is None else seed,
        arrival_s=arrival[order], prompt_tokens=prompt[order], output_tokens=output[order],
        workload=workload[order], acceptance=acceptance[order],
        prompts=None if prompts is None else [prompts[i] for i in order.tolist()],
        description=str(meta.get("description", "")),
        span_s=span,
        speculate=None if speculate is None else speculate[order],
    )


def _strings(table: Any, name: str, source: str, n: int, allow_null: bool = False
             ) -> np.ndarray | None:
    if name not in table.column_names:
        return None
    col = table.column(name)
    if not str(col.type).startswith(("string", "large_string")):
        raise NightjarInputError(f"{source}: column {name} is {col.type}, not text")
    if col.null_count and not allow_null:
        first = int(np.flatnonzero(np.asarray(col.is_null()))[0])
        raise NightjarInputError(f"{source}: row {first}: {name} is missing")
    values = np.asarray(col.to_pylist(), dtype=object)
    return values if len(values) == n else None


def _metadata(table: Any, source: str) -> dict[str, Any]:
    raw = (table.schema.metadata or {}).get(META_KEY)
    if raw is None:
        return {}
    try:
        meta = json.loads(raw)
    except ValueError:
        raise NightjarInputError(f"{source}: unreadable nightjar metadata") from None
    if not isinstance(meta, dict):
        raise NightjarInputError(f"{source}: the nightjar metadata is not an object")
    version = meta.get("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise NightjarInputError(
            f"{source}: format_version {version!r} is not supported (this version reads "
            f"{FORMAT_VERSION})"
        )
    seed = meta.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise NightjarInputError(f"{source}: seed must be an integer in 0..{MAX_SEED}")
    return meta
