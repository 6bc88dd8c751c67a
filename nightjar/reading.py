"""Reading user files without hanging, crashing or trusting their size or shape.

Every problem is a :class:`NightjarInputError` naming the file: a FIFO, a device or
a directory is refused before it is opened (opening a FIFO blocks forever), bytes
that are not UTF-8 are an error, and JSON nested too deeply for the parser, or with
integers too long to convert, is refused like any other malformed JSON.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError


def check_regular(path: Path, what: str) -> None:
    """Refuse anything but an existing regular file, before opening it."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise NightjarInputError(f"{what}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(mode):
        raise NightjarInputError(f"{what}: not a regular file")


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of a regular file; ``what`` names it in errors ("profile x.json")."""
    check_regular(path, what)
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise NightjarInputError(
            f"{what}: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    except OSError as exc:
        raise NightjarInputError(f"{what}: cannot read ({exc.strerror or exc})") from None


def loads_json(text: str, what: str) -> Any:
    """Decoded JSON, or one line saying where and why it is not valid JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise NightjarInputError(
            f"{what}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise NightjarInputError(f"{what}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise NightjarInputError(f"{what}: malformed JSON ({exc})") from None
