"""Output folders and files: checked before any work, and appearing whole or not at all.

Before a run starts, its ``--out`` target is resolved and checked (:func:`check_out_dir`,
:func:`check_out_file`): a symlink is followed to the folder it names (a dangling one or
a loop is refused), whatever is there must be a folder (a file) and not a FIFO or a
device, the folder that will hold it must be writable (a read-only mount is found by
trying), and a non-empty folder needs ``--force``. So nothing fails after the work.

A run then writes into a hidden temporary folder and moves it into place only when
everything is written. Where the target does not exist yet, the temporary folder sits
beside it and one rename makes the target appear complete; where it exists (empty, a
mount point, or with ``--force``), the temporary folder sits inside it, on the same
file system, and its entries are moved in. A run that fails or is interrupted (Ctrl-C,
SIGTERM, SIGHUP: see :mod:`nightjar.interrupts`) removes its temporary folder; only one
killed outright (SIGKILL, power loss) leaves a hidden ``.nightjar-tmp-*`` folder, which
blocks nothing and may be deleted.

``--force`` over an earlier nightjar run of any kind (a run set, a seeds run, a sweep, a
live run) replaces that run: the entries it wrote (the marker file lists them; for
folders written before the list existed, the names nightjar writes) go, the new run's
come in, and files of the user's own stay. So a folder never mixes two runs.

Writers that write in place (``nightjar live``, ``bench live``) mark the folder
unfinished until they complete (:func:`mark_finished`). A folder holding only such an
unfinished run, and nothing of the user's, is replaced by the next run without
``--force``: a failed engine start never blocks its own rerun. Every writer holds the
folder's lock (:mod:`nightjar.results.lock`) while it writes, so a second writer is
refused at once rather than both "winning", and a run in progress is never taken for an
unfinished one.

Default folder names (``reports/<trace>-<time>``) come from :func:`default_out_dir`:
the trace's name made safe for one path component, and a timestamp to the
microsecond, so two runs never share a folder.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.interrupts import deferred_signals, signals_as_interrupts
from nightjar.reading import as_path
from nightjar.results.lock import SUFFIX, busy, holding, taken

MARKER = ".nightjar-run"
MARKER_HEAD = "written by nightjar; safe to overwrite with --out\n"
MANIFEST_HEAD = "# what the run wrote here (a later --force replaces exactly these):\n"
UNFINISHED = "# unfinished: the run writing here has not completed\n"
# Longest folder name we make from a trace name (file systems allow 255 bytes).
MAX_NAME_CHARS = 64
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]+")
TMP_TAG = ".nightjar-tmp-"
OLD_TAG = ".nightjar-old-"
# The longest file name common file systems (ext4, APFS, NTFS) accept.
MAX_COMPONENT_BYTES = 255
# What a run folder written before the marker listed its entries may hold.
_RUN_FILES = re.compile(
    r"^(summary\.(csv|parquet)|report\.html|seeds\.csv|intervals\.(csv|json)|vllm\.log"
    r"|step_model\.csv|agreement\.csv|ranking\.csv|summary_comparison.*\.csv"
    r"|step_replay.*\.csv|\.steps-\d+\.jsonl"
    r"|sweep\.json|results\.(csv|parquet))$"  # a sweep's
)


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


# -- resolving and checking a target ---------------------------------------------------


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory"), (stat.S_ISREG, "a file")):
        if test(mode):
            return name
    return "not a regular file"


def resolve_target(path: Any, what: str = "--out") -> Path:
    """The absolute path ``path`` names, symlinks followed; a dangling symlink (the
    folder it names does not exist) or a loop is refused, as are over-long names."""
    path = as_path(path, what)
    too_long = next((p for p in path.parts if len(os.fsencode(p)) > MAX_COMPONENT_BYTES), None)
    if too_long is not None:
        raise NightjarInputError(
            f"cannot write to {path}: the name {too_long[:40]}... is longer than "
            f"{MAX_COMPONENT_BYTES} bytes"
        )
    if os.path.islink(path):
        try:
            os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise NightjarInputError(
                    f"cannot write to {path}: it is a symbolic link loop") from None
            raise NightjarInputError(
                f"cannot write to {path}: it is a symbolic link to {os.readlink(path)}, "
                "which does not exist (create it, or remove the link)"
            ) from None
    return Path(os.path.realpath(path))


def _existing_ancestor(real: Path) -> Path:
    parent = real.parent
    while not os.path.lexists(parent) and parent != parent.parent:
        parent = parent.parent
    return parent


def _probe_writable(folder: Path, shown: Path) -> None:
    """Make and remove a folder in ``folder``: the only sure test of a read-only mount,
    a full disk or missing permissions, done before any work."""
    try:
        mode = os.stat(folder).st_mode
    except OSError as exc:
        raise NightjarInputError(f"cannot write to {shown}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        raise NightjarInputError(
            f"cannot write to {shown}: {folder} is {_kind(mode)}, not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".nightjar-probe-", dir=folder))
    except OSError as exc:
        raise NightjarInputError(f"cannot write to {shown}: {exc.strerror or exc}") from None


def check_out_dir(path: Any, force: bool = False) -> Path:
    """The folder a run will write, resolved and checked before any work (see the
    module docstring); refuses a file or device there, a non-writable place, and a
    non-empty folder (also an earlier nightjar run's) unless ``force``."""
    real = resolve_target(path)
    shown = Path(path)
    if os.path.lexists(real):
        mode = os.stat(real).st_mode
        if not stat.S_ISDIR(mode):
            raise NightjarInputError(
                f"cannot write to {shown}: it exists and is {_kind(mode)}, not a directory")
        holder = busy(real)
        if holder is not None:
            raise taken(shown, holder)
        if not force and _entries(real) and not unfinished_run(real):
            what = "an earlier nightjar run" if (real / MARKER).exists() else "files"
            raise NightjarInputError(
                f"output directory {shown} already holds {what}; "
                "choose a new directory or pass --force to overwrite"
            )
        _probe_writable(real, shown)
    else:
        _probe_writable(_existing_ancestor(real), shown)
    return real


def _entries(folder: Path, but: Iterable[Path] = ()) -> list[Path]:
    skip = {p.name for p in but} | {SUFFIX}
    return [p for p in folder.iterdir() if p.name not in skip]


def unfinished_run(folder: Path, theirs: bool = False) -> bool:
    """Whether ``folder`` holds only an in-place run that never completed (and nothing
    of the user's): the next run may replace it without ``--force``. With ``theirs``,
    whether it holds an unfinished run at all, the user's files beside it or not."""
    try:
        text = (folder / MARKER).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if UNFINISHED not in text:
        return False
    if theirs:
        return True
    ours = {p.name for p in earlier_run_entries(folder)} | {MARKER}
    return all(p.name in ours or p.name.startswith((TMP_TAG, OLD_TAG)) or TMP_TAG in p.name
               for p in _entries(folder))


def mark_unfinished(folder: Path) -> None:
    (folder / MARKER).write_text(MARKER_HEAD + UNFINISHED)


def mark_finished(folder: Path) -> None:
    """Mark an in-place run's folder complete (see the module docstring)."""
    try:
        (Path(folder) / MARKER).write_text(MARKER_HEAD)
    except OSError as exc:
        raise _oserror(Path(folder), exc) from None


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it: put it straight back
    os.umask(mask)
    return mask


def plain_file_mode() -> int:
    """The mode ``open()`` gives a new file (0666 less the umask), not mkstemp's 0600."""
    return 0o666 & ~_umask()


def _oserror(path: Path, exc: OSError) -> NightjarInputError:
    return NightjarInputError(f"cannot write to {path}: {exc.strerror or exc}")


# -- staging -----------------------------------------------------------------------------


@contextmanager
def staged_out_dir(path: Path, force: bool = False) -> Iterator[Path]:
    """A temporary folder to write into; it becomes ``path`` when the block ends
    without an exception, and is removed when it raises (Ctrl-C, SIGTERM and SIGHUP
    included). ``path`` is checked before anything is written (:func:`check_out_dir`);
    with ``force`` an earlier nightjar run there is replaced (module docstring)."""
    shown = Path(path)
    real = check_out_dir(path, force)
    with holding(real, shown), signals_as_interrupts():
        existed = real.is_dir()
        # A run that never completed there is replaced as with --force.
        force = force or (existed and unfinished_run(real))
        try:
            if existed:
                tmp = Path(tempfile.mkdtemp(prefix=TMP_TAG, dir=real))
            else:
                real.parent.mkdir(parents=True, exist_ok=True)
                tmp = Path(tempfile.mkdtemp(prefix=f".{real.name[:100]}{TMP_TAG}",
                                            dir=real.parent))
            # mkdtemp makes 0700 (private while staged); the finished folder gets the
            # mode any other tool's mkdir would, so others on a shared machine can read it.
            os.chmod(tmp, 0o777 & ~_umask())
        except OSError as exc:
            raise _oserror(shown, exc) from None
        try:
            try:
                (tmp / MARKER).write_text(MARKER_HEAD)
            except OSError as exc:
                raise _oserror(shown, exc) from None
            yield tmp
            try:
                _move_into_place(tmp, real, shown, existed, force)
            except OSError as exc:
                raise _oserror(shown, exc) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


def manifest(names: Iterable[str]) -> str:
    """The marker's text for a run that wrote ``names`` (what a later --force replaces)."""
    return MARKER_HEAD + MANIFEST_HEAD + "".join(f"{n}\n" for n in sorted(names))


def earlier_run_entries(folder: Path) -> list[Path]:
    """What an earlier nightjar run wrote in ``folder`` (nothing if it holds none): the
    entries its marker lists, or, for folders written before the marker listed them,
    the names nightjar writes (run sub-folders, seed folders, tables, report, logs)."""
    marker = folder / MARKER
    if not marker.is_file():
        return []
    try:
        text = marker.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    if MANIFEST_HEAD in text:
        names = [ln for ln in text.split(MANIFEST_HEAD, 1)[1].splitlines() if ln.strip()]
        listed = {n for n in names if "/" not in n and n not in (".", "..", MARKER)}
        return [folder / n for n in sorted(listed) if os.path.lexists(folder / n)]
    found = []
    sweep = (folder / "sweep.json").is_file()
    for entry in folder.iterdir():
        if entry.name.startswith((TMP_TAG, OLD_TAG)) or TMP_TAG in entry.name:
            continue
        if _RUN_FILES.match(entry.name) or (entry.is_dir() and not entry.is_symlink() and (
                (entry / "summary.json").exists() or (sweep and entry.name == "cells") or (
                    entry.name.startswith("seed-") and (entry / MARKER).exists()))):
            found.append(entry)
    return found


def _move_into_place(tmp: Path, real: Path, shown: Path, existed: bool, force: bool) -> None:
    names = [p.name for p in tmp.iterdir() if p.name != MARKER]
    (tmp / MARKER).write_text(manifest(names))
    if not existed:
        if os.path.lexists(real):  # something appeared there while the run ran
            raise NightjarInputError(f"cannot write to {shown}: it appeared during the run")
        os.replace(tmp, real)  # one rename: the folder appears complete
        return
    if not force and _entries(real, but=[tmp]):
        raise NightjarInputError(
            f"output directory {shown} got files during the run; pass --force to overwrite")
    with deferred_signals():  # the swap is a few renames: never half of one
        old = Path(tempfile.mkdtemp(prefix=OLD_TAG, dir=real))
        try:
            for entry in earlier_run_entries(real):
                os.replace(entry, old / entry.name)
            for name in [*names, MARKER]:
                target = real / name
                if os.path.lexists(target):  # the user's own file of that name
                    os.replace(target, old / f"{name}.replaced")
                os.replace(tmp / name, target)
        finally:
            shutil.rmtree(old, ignore_errors=True)


def clear_earlier_run(folder: Path) -> None:
    """Remove what an earlier nightjar run wrote in ``folder`` (for writers that stream
    into the folder itself, as ``nightjar live`` does, after ``--force``)."""
    for entry in earlier_run_entries(folder):
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


# -- single output files -----------------------------------------------------------------


def check_out_file(path: Any, force: bool = False, inputs: Iterable[Any] = (),
                   what: str = "--out") -> Path:
    """The file a command will write, resolved and checked before any work: a symlink
    is followed (a dangling one refused), whatever is there must be a regular file
    (never a FIFO, a device or a folder) and is replaced only with ``force``, never one
    of ``inputs``, and the folder that will hold it must be writable."""
    real = resolve_target(path, what)
    shown = Path(path)
    for given in inputs:
        try:
            same = os.path.realpath(given) == str(real)
        except (TypeError, ValueError):
            same = False
        if same:
            raise NightjarInputError(
                f"cannot write {shown}: it is the input {given}; choose another {what}")
    if os.path.lexists(real):
        mode = os.stat(real).st_mode
        if not stat.S_ISREG(mode):
            raise NightjarInputError(
                f"cannot write {shown}: it exists and is {_kind(mode)}, not a regular file")
        if not force:
            raise NightjarInputError(f"{shown} exists; pass --force to overwrite it")
    _probe_writable(_existing_ancestor(real) if not real.parent.exists() else real.parent,
                    shown)
    return real


def write_out_file(real: Path, text: str, shown: Path | None = None) -> None:
    """Write ``text`` to ``real`` (from :func:`check_out_file`) whole or not at all: into
    a temporary file beside it, renamed over it when complete."""
    shown = shown or real
    with signals_as_interrupts():
        tmp: Path | None = None
        try:
            real.parent.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f".{real.name[:100]}{TMP_TAG}", dir=real.parent)
            tmp = Path(name)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.chmod(tmp, plain_file_mode())
            os.replace(tmp, real)
            tmp = None
        except OSError as exc:
            raise NightjarInputError(f"cannot write {shown}: {exc.strerror or exc}") from None
        finally:
            if tmp is not None:
                tmp.unlink(missing_ok=True)
