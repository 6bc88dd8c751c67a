"""Output folders that appear whole or not at all.

A run writes into a hidden temporary folder next to its ``--out`` folder and renames
it into place only when everything is written. A run that fails or is interrupted
(Ctrl-C) removes its temporary folder, so nothing is left that would block the same
command from running again; one killed outright (SIGKILL, power loss) leaves only a
hidden ``.NAME.nightjar-tmp-*`` folder beside ``--out``, which blocks nothing and
may be deleted.

Default folder names (``reports/<trace>-<time>``) come from :func:`default_out_dir`:
the trace's name made safe for one path component, and a timestamp to the
microsecond, so two runs never share a folder.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nightjar.errors import NightjarInputError

MARKER = ".nightjar-run"
# Longest folder name we make from a trace name (file systems allow 255 bytes).
MAX_NAME_CHARS = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
TMP_TAG = ".nightjar-tmp-"
# The longest file name common file systems (ext4, APFS, NTFS) accept.
MAX_COMPONENT_BYTES = 255


def safe_name(name: str, fallback: str = "trace") -> str:
    """``name`` as one portable path component: no separators, no ``..``, bounded."""
    text = _UNSAFE.sub("_", name)
    text = re.sub(r"\.{2,}", ".", text).strip("._-")
    return text[:MAX_NAME_CHARS].rstrip("._-") or fallback


def default_out_dir(prefix: str, root: Path = Path("reports")) -> Path:
    """``root/<safe prefix>-YYYYmmdd-HHMMSS-micro``, unique even within one second."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    base = f"{safe_name(prefix)}-{stamp}-{int(now % 1 * 1e6):06d}"
    path, n = root / base, 2
    while path.exists():
        path, n = root / f"{base}-{n}", n + 1
    return path


def check_out_dir(path: Path, force: bool = False) -> None:
    """Refuse a target that is not ours to write: a file, or a non-empty folder
    (also an earlier nightjar run's) unless ``force``."""
    too_long = next((p for p in path.parts if len(os.fsencode(p)) > MAX_COMPONENT_BYTES), None)
    if too_long is not None:
        raise NightjarInputError(
            f"cannot write to {path}: the name {too_long[:40]}... is longer than "
            f"{MAX_COMPONENT_BYTES} bytes"
        )
    if path.exists() and not path.is_dir():
        raise NightjarInputError(f"cannot write to {path}: it exists and is not a directory")
    if path.is_dir() and not force and any(path.iterdir()):
        what = "an earlier nightjar run" if (path / MARKER).exists() else "files"
        raise NightjarInputError(
            f"output directory {path} already holds {what}; "
            "choose a new directory or pass --force to overwrite"
        )


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


def _oserror(path: Path, exc: OSError) -> NightjarInputError:
    return NightjarInputError(f"cannot write to {path}: {exc.strerror or exc}")


@contextmanager
def staged_out_dir(path: Path, force: bool = False) -> Iterator[Path]:
    """A temporary folder to write into; it becomes ``path`` when the block ends
    without an exception, and is removed when it raises (Ctrl-C included).

    ``path`` is checked before anything is written (see :func:`check_out_dir`). With
    ``force`` and an existing folder, the finished files are moved into it one by
    one, replacing files of the same name and leaving everything else alone.
    """
    path = Path(path)
    check_out_dir(path, force)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name[:100]}{TMP_TAG}", dir=path.parent))
        # mkdtemp makes 0700 (private while staged); the finished folder gets the mode
        # any other tool's mkdir would, so others on a shared machine can read it.
        os.chmod(tmp, 0o777 & ~_umask())
    except OSError as exc:
        raise _oserror(path, exc) from None
    try:
        try:
            (tmp / MARKER).write_text("written by nightjar; safe to overwrite with --out\n")
        except OSError as exc:
            raise _oserror(path, exc) from None
        yield tmp
        check_out_dir(path, force)  # something may have appeared there meanwhile
        try:
            _move_into_place(tmp, path)
        except OSError as exc:
            raise _oserror(path, exc) from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _move_into_place(tmp: Path, path: Path) -> None:
    if not path.exists() or (path.is_dir() and not any(path.iterdir())):
        os.replace(tmp, path)  # one rename: the folder appears complete
        return
    _merge(tmp, path)


def _merge(src: Path, dst: Path) -> None:
    """Move ``src``'s files into ``dst``, replacing same-named files only (--force)."""
    dst.mkdir(exist_ok=True)
    for entry in src.iterdir():
        target = dst / entry.name
        if entry.is_dir() and target.is_dir():
            _merge(entry, target)
        else:
            if target.is_dir():
                shutil.rmtree(target)
            os.replace(entry, target)
