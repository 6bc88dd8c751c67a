"""Row-by-row reading of the CSV trace formats, with one-line errors that name the line."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path

from nightjar.errors import NightjarInputError
from nightjar.reading import open_regular


def csv_rows(path: Path, needed: tuple[str, ...]) -> Iterator[tuple[str, dict[str, str]]]:
    """(``"<path>: line N"``, row by column) for every non-blank data row.

    The header must name every column in ``needed``; other columns are kept and may be
    ignored. Unreadable files, undecodable bytes and ragged rows are input errors; a
    UTF-8 byte-order mark before the header (Excel writes one) is not part of the first
    column's name, and CRLF line ends are read as line ends.
    """
    raw = open_regular(path, f"{path}", max_bytes=None)  # streamed, row by row
    try:
        with io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                raise NightjarInputError(f"{path}: empty CSV")
            cols = [h.strip() for h in header]
            missing = [c for c in needed if c not in cols]
            if missing:
                raise NightjarInputError(
                    f"{path}: line 1: missing column(s) {', '.join(missing)} "
                    f"(need {','.join(needed)})"
                )
            for row in reader:
                where = f"{path}: line {reader.line_num}"
                if not row or all(not c.strip() for c in row):
                    continue
                if len(row) != len(cols):
                    raise NightjarInputError(
                        f"{where}: expected {len(cols)} fields, got {len(row)}"
                    )
                yield where, dict(zip(cols, (c.strip() for c in row), strict=True))
    except UnicodeDecodeError as exc:
        raise NightjarInputError(f"{path}: not UTF-8 text ({exc.reason})") from None
    except (OSError, csv.Error) as exc:
        raise NightjarInputError(f"{path}: cannot read CSV ({exc})") from None
    finally:
        raw.close()


def csv_header(path: Path) -> list[str]:
    """The header's column names (stripped, without a byte-order mark); an unreadable,
    empty or non-regular file is an input error (never opened blocking)."""
    raw = open_regular(path, f"{path}", max_bytes=None)
    try:
        with io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as f:
            header = next(csv.reader(f), None)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise NightjarInputError(f"{path}: cannot read CSV ({exc})") from None
    finally:
        raw.close()
    if header is None:
        raise NightjarInputError(f"{path}: empty CSV")
    return [h.strip() for h in header]
