"""One writer per output folder: a lock taken before a run writes, held until it is done.

Without it two runs aimed at one ``--out`` (two sweeps, a ``sim --force`` beside a
sweep, a live run and its impatient rerun) could both print "wrote" while the folder
holds one of them, or, for writers that stream in place, parts of each.

The lock is an advisory ``flock`` on a hidden file beside the folder
(``.<name>.nightjar-lock`` in its parent), or inside the folder where the parent cannot
be written (a mount point): the same place for every writer, whether or not the folder
exists yet (missing folders above it are made for it, and removed again when the run
leaves nothing in them). The file holds the writer's pid, for the message the loser gets, and is
removed by the holder when it lets go. The kernel drops a ``flock`` when its process
dies, so a run killed outright (SIGKILL, power loss) never leaves a folder locked.

Invariant: a process holds at most one lock per folder; taking it again in the same
process (a command whose steps each write the folder) is a no-op.
"""

from __future__ import annotations

import atexit
import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from nightjar.errors import NightjarInputError

SUFFIX = ".nightjar-lock"

# Folders this process holds, by resolved path: lock file descriptor, its path, and the
# folders above it that taking the lock made.
_held: dict[Path, tuple[int, Path, list[Path]]] = {}


def lock_path(real: Path) -> Path:
    """Where the lock of the resolved folder ``real`` lives."""
    parent = real.parent
    if os.access(parent, os.W_OK) or not real.is_dir():
        return parent / f".{real.name[:200]}{SUFFIX}"
    return real / SUFFIX


def _holder(path: Path) -> str:
    try:
        pid = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return "another nightjar run"
    return f"another nightjar run (pid {pid})" if pid.isdigit() else "another nightjar run"


def taken(shown: Path, holder: str) -> NightjarInputError:
    """The one-line refusal a second writer gets."""
    return NightjarInputError(
        f"{shown} is being written by {holder}; wait for it to finish or choose another --out")


def _made_parents(folder: Path) -> list[Path]:
    """Make ``folder`` and any missing folder above it; the ones made, deepest first."""
    missing = []
    while not os.path.lexists(folder) and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for made in reversed(missing):
        os.mkdir(made)
    return missing


def _acquire(real: Path, shown: Path) -> tuple[int, Path, list[Path]]:
    path = lock_path(real)
    try:
        made = _made_parents(path.parent)
    except OSError as exc:
        raise NightjarInputError(f"cannot write to {shown}: {exc.strerror or exc}") from None
    try:
        return (*_lock(path, shown), made)
    except BaseException:
        _remove_empty(made)
        raise


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError:
            return  # not empty: the run left something there, and above it too


def _lock(path: Path, shown: Path) -> tuple[int, Path]:
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise NightjarInputError(f"cannot write to {shown}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise taken(shown, _holder(path)) from None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        # The last holder removed the file between our open and our lock: the lock we
        # hold is on a name nobody else will find. Take the new one.
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd, path


def _release(real: Path) -> None:
    held = _held.pop(real, None)
    if held is None:
        return
    fd, path, made = held
    # Remove the name while still holding the lock, so no one locks a file that is
    # about to vanish (see the retry in _lock).
    with suppress(OSError):
        path.unlink()
    os.close(fd)
    _remove_empty(made)


@contextmanager
def holding(real: Path, shown: Path | None = None) -> Iterator[None]:
    """Hold the lock of the resolved folder ``real`` for the block (a no-op when this
    process already holds it); another writer's lock is a one-line error."""
    if real in _held:
        yield
        return
    _held[real] = _acquire(real, shown or real)
    try:
        yield
    finally:
        _release(real)


def hold_until_exit(real: Path, shown: Path | None = None) -> None:
    """Hold the lock of ``real`` until this process ends, for writers that return
    before their run is over (``nightjar live`` prepares its folder, then streams)."""
    if real in _held:
        return
    _held[real] = _acquire(real, shown or real)
    atexit.register(_release, real)


def held(real: Path) -> bool:
    """Whether this process holds the lock of the resolved folder ``real``."""
    return real in _held


def busy(real: Path) -> str | None:
    """Who holds the lock of ``real``, where another process does (None otherwise)."""
    if real in _held:
        return None
    path = lock_path(real)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return _holder(path)
    finally:
        os.close(fd)
    return None
