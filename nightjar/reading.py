"""Reading user files without hanging, crashing or trusting their size or shape.

Every file the user names goes through :func:`open_regular` (or a helper built on it),
and every problem is a :class:`NightjarInputError` naming the file:

- nothing but a regular file is read. The file is opened non-blocking and checked with
  ``fstat`` on the open descriptor, so a FIFO, a device, a socket or a directory is
  refused without ever blocking (opening a FIFO for reading blocks until a writer
  comes; reading ``/dev/zero`` never ends), also behind a symlink, and also when the
  path is swapped between a check and the open;
- text is UTF-8; a leading byte-order mark (what Excel and Notepad write) is dropped;
  other bytes that are not UTF-8 are an error naming the byte;
- JSON nested too deeply for the parser, with integers too long to convert, or with a
  lone surrogate escape (``"\\ud800"``, which no file can hold as UTF-8) is refused like
  any other malformed JSON; TOML likewise.

Files that another library opens by path (pandas, a tokenizer) are first checked with
:func:`check_regular`.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
import tomllib
from pathlib import Path
from typing import IO, Any

from nightjar.errors import NightjarInputError

BOM = "\ufeff"
# A text file larger than this is not an input nightjar reads (a trace of millions of
# requests is a few hundred MB); it is refused rather than read into memory.
MAX_TEXT_BYTES = 4 * 2**30


def as_path(path: Any, what: str) -> Path:
    """``path`` (a str or os.PathLike) as a Path, or one line saying it is not a path."""
    if isinstance(path, bytes) or not isinstance(path, str | os.PathLike):
        raise NightjarInputError(f"{what}: expected a file path, got {_short(path)}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text:
        raise NightjarInputError(f"{what}: expected a file path, got {_short(path)}")
    if "\x00" in text:
        raise NightjarInputError(f"{what}: a path cannot hold a NUL character")
    return Path(text)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _why(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop"
    if exc.errno == errno.ENOENT:
        return "no such file"
    return exc.strerror or str(exc)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_regular(path: Path, what: str) -> None:
    """Refuse anything but an existing regular file (symlinks followed), without opening
    it; for paths another library opens."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise NightjarInputError(f"{what}: cannot read ({_why(exc)})") from None
    except ValueError:  # an embedded NUL
        raise NightjarInputError(f"{what}: a path cannot hold a NUL character") from None
    if not stat.S_ISREG(mode):
        raise NightjarInputError(f"{what}: {_kind(mode)}, not a regular file")


def check_folder(path: Path, what: str) -> None:
    """Refuse anything but an existing directory (symlinks followed)."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise NightjarInputError(f"{what}: cannot read ({_why(exc)})") from None
    except ValueError:
        raise NightjarInputError(f"{what}: a path cannot hold a NUL character") from None
    if not stat.S_ISDIR(mode):
        raise NightjarInputError(f"{what}: {_kind(mode) if not stat.S_ISREG(mode) else 'a file'},"
                                 " not a folder")


def open_regular(path: Path, what: str, max_bytes: int | None = MAX_TEXT_BYTES) -> IO[bytes]:
    """A binary file object for ``path``, which must be a regular file; never blocks.

    ``max_bytes`` bounds what a whole-file reader may load; a streaming reader (the
    chunked CSV importers) passes None."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise NightjarInputError(f"{what}: cannot read ({_why(exc)})") from None
    except ValueError:
        raise NightjarInputError(f"{what}: a path cannot hold a NUL character") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NightjarInputError(f"{what}: {_kind(st.st_mode)}, not a regular file")
        if max_bytes is not None and st.st_size > max_bytes:
            raise NightjarInputError(
                f"{what}: {st.st_size / 2**30:.1f} GiB is larger than any input nightjar "
                f"reads whole ({max_bytes / 2**30:g} GiB)")
        # A regular file: reads never block, but clear O_NONBLOCK for the libraries.
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def decode_text(data: bytes, what: str) -> str:
    """UTF-8 text without a leading byte-order mark."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NightjarInputError(
            f"{what}: not UTF-8 text (byte {exc.start}: {exc.reason})"
        ) from None
    return text[1:] if text.startswith(BOM) else text


def read_text(path: Path, what: str) -> str:
    """The UTF-8 text of a regular file; ``what`` names it in errors ("profile x.json")."""
    with open_regular(path, what) as f:
        try:
            data = f.read()
        except OSError as exc:
            raise NightjarInputError(f"{what}: cannot read ({_why(exc)})") from None
    return decode_text(data, what)


def loads_json(text: str, what: str, *, surrogates: bool = False) -> Any:
    """Decoded JSON, or one line saying where and why it is not valid JSON.

    ``surrogates=True`` lets lone surrogate escapes through, for datasets whose texts
    the caller cleans itself (:func:`clean_text`)."""
    if text.startswith(BOM):
        text = text[1:]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NightjarInputError(
            f"{what}: malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    except RecursionError:
        raise NightjarInputError(f"{what}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more digits than Python converts
        raise NightjarInputError(f"{what}: malformed JSON ({exc})") from None
    if not surrogates:
        _no_surrogates(data, what)
    return data


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (real datasets hold a few)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _no_surrogates(data: Any, what: str) -> None:
    """Refuse lone surrogates (``"\\ud800"``): valid JSON escapes, but no UTF-8 text can
    hold them, so every later write or print of the value would fail."""
    todo = [data]
    while todo:  # iterative: a document nested nearly to the parser's limit is fine
        node = todo.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                raise NightjarInputError(
                    f"{what}: the text {_short(node)} holds a lone surrogate escape "
                    "(\\ud800-\\udfff), which is not a character"
                ) from None
        elif isinstance(node, dict):
            todo.extend(node.keys())
            todo.extend(node.values())
        elif isinstance(node, list):
            todo.extend(node)


def read_json(path: Path, what: str) -> Any:
    return loads_json(read_text(path, what), what)


def loads_toml(text: str, what: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise NightjarInputError(f"{what}: malformed TOML ({exc})") from None
    except RecursionError:
        raise NightjarInputError(f"{what}: TOML nested too deeply") from None
    except ValueError as exc:  # an integer too long to convert
        raise NightjarInputError(f"{what}: malformed TOML ({exc})") from None
