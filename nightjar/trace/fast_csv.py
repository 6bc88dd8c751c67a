"""Request logs read in chunks: the fast path of the CSV importers, for logs of millions of rows.

pandas' C parser reads ``CHUNK_ROWS`` rows at a time and numpy checks and windows
them, so memory holds one chunk plus the rows a window keeps, whatever the file's
size, and a 27M-row Azure week reads in minutes rather than hours. The row-by-row
readers (:mod:`nightjar.trace.csv_rows`) stay the reference: the moment a chunk holds
anything they would decide (a ragged row, bytes that are not UTF-8, a cell that is not
a clean number, a header that is not the columns exactly, a row earlier than the
first), the fast path raises :class:`SlowPath` and the importer reads the file again
row by row, which gives the one-line error naming the line, or the same trace.
Both paths keep the same rows, skip and count the same ones and stop at the same
``limit`` (``tests/test_trace_scale.py`` checks them against each other).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from nightjar.trace.workloads import MAX_TOKENS

CHUNK_ROWS = 100_000
_NAN_TEXT = {"nan", "+nan", "-nan"}

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]


class SlowPath(Exception):
    """The chunk holds something only the row-by-row reader decides."""


@dataclass
class Kept:
    """The rows an import keeps, in file order, and the counts of those it skipped."""

    arrival: list[F64] = field(default_factory=list)
    prompt: list[I64] = field(default_factory=list)
    output: list[I64] = field(default_factory=list)
    count: int = 0
    zero: int = 0  # rows with a zero token count (in the window)
    non_finite: int = 0  # rows with a NaN or infinite time

    def add(self, arrival: F64, prompt: I64, output: I64) -> None:
        self.arrival.append(arrival)
        self.prompt.append(prompt)
        self.output.append(output)
        self.count += len(arrival)

    def columns(self) -> tuple[list[float], list[int], list[int]]:
        def cat(parts: list[Any], dtype: Any) -> Any:
            return np.concatenate(parts).astype(dtype) if parts else np.empty(0, dtype)

        return (cat(self.arrival, np.float64).tolist(), cat(self.prompt, np.int64).tolist(),
                cat(self.output, np.int64).tolist())


def chunks(path: Path, columns: tuple[str, ...], text: tuple[str, ...] = ()
           ) -> Iterator[Any]:
    """DataFrames of ``columns`` (file order), at most ``CHUNK_ROWS`` rows each;
    ``text`` columns stay strings, the others are parsed by pandas."""
    import pandas as pd

    from nightjar.reading import open_regular

    raw = open_regular(path, f"{path}", max_bytes=None)  # a FIFO is refused, never opened
    try:
        reader = pd.read_csv(
            raw, usecols=list(columns), dtype={c: str for c in text}, chunksize=CHUNK_ROWS,
            encoding="utf-8-sig", engine="c", keep_default_na=False, na_values=[],
            skip_blank_lines=True,
        )
        with reader:
            yield from reader
    except (ValueError, UnicodeDecodeError, OSError, pd.errors.ParserError,
            pd.errors.EmptyDataError) as exc:
        raise SlowPath(str(exc)) from None
    finally:
        raw.close()


def counts(col: Any, lo: int = 0, integral_floats: bool = False) -> I64:
    """A token-count column: integers in ``lo..MAX_TOKENS``, else :class:`SlowPath`."""
    kind = col.dtype.kind
    if kind == "f" and integral_floats:
        values: F64 = np.asarray(col, dtype=np.float64)
        if not (np.isfinite(values).all() and (values == np.floor(values)).all()):
            raise SlowPath(col.name)
        if values.size and (values.min() < lo or values.max() > MAX_TOKENS):
            raise SlowPath(col.name)
        return values.astype(np.int64)
    if kind not in "iu":
        raise SlowPath(col.name)
    ints: I64 = np.asarray(col, dtype=np.int64)
    if ints.size and (ints.min() < lo or ints.max() > MAX_TOKENS):
        raise SlowPath(col.name)
    return ints


def seconds(col: Any, finite_only: bool = False) -> F64:
    """Times in seconds: plain numbers, or ISO 8601 datetimes (naive ones are UTC) as
    seconds since the epoch; ``NaN`` text gives NaN, ``inf`` gives inf."""
    import pandas as pd

    if col.dtype.kind in "iuf":
        values = np.array(col, dtype=np.float64)
    else:
        values = np.array(pd.to_numeric(col, errors="coerce"), dtype=np.float64)
        nan_text = col.str.strip().str.lower().isin(_NAN_TEXT).to_numpy()
        rest = np.isnan(values) & ~nan_text
        if rest.any():
            stamps = pd.to_datetime(col[rest], format="ISO8601", errors="coerce", utc=True)
            if stamps.isna().any():
                raise SlowPath(col.name)
            values[rest] = stamps.dt.as_unit("ns").astype("int64").to_numpy() / 1e9
    if finite_only and not np.isfinite(values).all():
        raise SlowPath(col.name)
    return values


class Window:
    """The fast twin of :class:`nightjar.trace.importers.TimeWindow`: rows whose time
    after the first finite row's lies in ``[start_s, end_s)``, re-based to ``start_s``,
    at most ``limit`` of them; rows with a zero token count in the window are counted
    and left out; rows with a non-finite time are counted and left out."""

    def __init__(self, start_s: float, end_s: float, limit: int | None) -> None:
        self.start_s, self.end_s, self.limit = start_s, end_s, limit
        self.base: float | None = None
        self.kept = Kept()

    @property
    def full(self) -> bool:
        return self.limit is not None and self.kept.count >= self.limit

    def offer(self, ts: F64, prompt: I64, output: I64, wanted: Any = None) -> None:
        """One chunk's rows (``wanted``: a mask of rows the import looks at at all,
        e.g. one BurstGPT model; the others still set the base time)."""
        finite = np.isfinite(ts)
        if self.base is None and finite.any():
            self.base = float(ts[finite][0])
        t = ts - (self.base if self.base is not None else 0.0)
        if (t[finite] < 0).any():
            raise SlowPath("a row earlier than the first")
        look = np.ones(len(ts), dtype=bool) if wanted is None else np.asarray(wanted, bool)
        inside = finite & look & (t >= self.start_s) & (t < self.end_s)
        zero = inside & ((prompt == 0) | (output == 0))
        keep = inside & ~zero
        stop = len(ts)
        if self.limit is not None:
            reached = np.flatnonzero(self.kept.count + np.cumsum(keep) >= self.limit)
            if reached.size:
                stop = int(reached[0]) + 1
        cut = slice(0, stop)
        self.kept.non_finite += int(np.count_nonzero(~finite[cut]))
        self.kept.zero += int(np.count_nonzero(zero[cut]))
        k = keep[cut]
        self.kept.add(t[cut][k] - self.start_s, prompt[cut][k], output[cut][k])
