"""A sweep's output folder: one file per finished cell, written atomically, and the table.

Layout (docs/sweep.md)::

    <out>/.nightjar-run       the output-folder marker every nightjar command writes
    <out>/sweep.json          the resolved grid of the latest run (marks a sweep folder)
    <out>/experiment.toml     a copy of --config, when one was given
    <out>/cells/<key>.json    one finished cell: {"cell": parameters, "row": table row}
    <out>/results.csv         one row per cell of the grid (and results.parquet)
    <out>/report.html

A cell file appears only complete: it is written to a temporary name in the same
folder, flushed to disk and renamed over its final name (a rename within a folder is
atomic on POSIX). A run killed mid-write leaves at most a ``.tmp`` file, which the
next run deletes and which no reader treats as a cell.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from nightjar.errors import NightjarInputError
from nightjar.reading import as_path, check_folder, check_regular, open_regular, read_json
from nightjar.results.outdir import MARKER

SPEC_FILE = "sweep.json"
CELLS = "cells"
TMP_SUFFIX = ".tmp"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}{TMP_SUFFIX}")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise NightjarInputError(f"cannot write to {path}: {exc.strerror or exc}") from None
    except BaseException:
        # Ctrl-C between open and rename: no temporary file survives either.
        tmp.unlink(missing_ok=True)
        raise


# What a sweep writes in its folder (the marker lists them, so that ``--force`` of any
# other run there replaces the whole sweep).
ENTRIES = (SPEC_FILE, CELLS, "results.csv", "results.parquet", "report.html")


def prepare_sweep_dir(out: Path, force: bool, *, config_copy: bool = False) -> Path:
    """Create ``out`` or reopen an earlier sweep in it (that is how a sweep resumes).

    A non-empty folder that is not a sweep is refused unless ``force``; with it, an
    earlier nightjar run of another kind there is removed first, so the folder never
    mixes the two. A folder left by a sweep that failed before it wrote its grid
    (nothing but the marker and an empty ``cells/``) is not "files": it is reused.
    The caller holds the folder's lock (:mod:`nightjar.results.lock`).
    """
    from nightjar.results.outdir import check_out_dir, clear_earlier_run, manifest

    shown = Path(out)
    # Resolved and checked as any --out (symlinks, FIFOs, read-only mounts, long names);
    # an earlier sweep there is not "files": that is how a sweep resumes.
    out = check_out_dir(out, force=True)  # the emptiness rule is the next one
    resumes = (out / SPEC_FILE).is_file()
    if out.is_dir() and not resumes and _holds_files(out):
        if not force:
            raise NightjarInputError(
                f"output directory {shown} already holds files that are not a sweep; "
                "choose a new directory or pass --force to write into it"
            )
        clear_earlier_run(out)
    kept = resumes and (out / "experiment.toml").is_file()
    names = [*ENTRIES, "experiment.toml"] if config_copy or kept else ENTRIES
    try:
        (out / CELLS).mkdir(parents=True, exist_ok=True)
        (out / MARKER).write_text(manifest(names))
    except OSError as exc:
        raise NightjarInputError(f"cannot write to {out}: {exc.strerror or exc}") from None
    for stale in (out / CELLS).glob(f".*{TMP_SUFFIX}"):
        stale.unlink(missing_ok=True)  # left by a run that was killed mid-write
    return out


def _holds_files(out: Path) -> bool:
    from nightjar.results.lock import SUFFIX

    for entry in out.iterdir():
        if entry.name in (MARKER, SUFFIX):
            continue
        if entry.name == CELLS and entry.is_dir() and not any(entry.iterdir()):
            continue
        return True
    return False


def cell_path(out: Path, key: str) -> Path:
    return Path(out) / CELLS / f"{key}.json"


def save_cell(out: Path, key: str, params: dict[str, Any], row: dict[str, Any]) -> None:
    doc = {"cell": params, "row": row}
    write_atomic(cell_path(out, key), json.dumps(doc, indent=1, allow_nan=False) + "\n")


def load_cell(out: Path, key: str) -> dict[str, Any] | None:
    """A finished cell's row, or None if the cell has not run (or its file is unreadable,
    which can only be a file someone else damaged: it is then recomputed)."""
    path = cell_path(out, key)
    if not os.path.lexists(path):
        return None
    try:
        doc = read_json(path, f"{path}")  # never blocks: a FIFO there is refused
    except NightjarInputError:
        return None
    row = doc.get("row") if isinstance(doc, dict) else None
    return row if isinstance(row, dict) and row.get("cell") == key else None


def table_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """The rows as the table reads back: a column with no value anywhere (e.g.
    ``max_model_len`` left unlimited) is a float column of NaN, as CSV gives it."""
    frame = pd.DataFrame(list(rows))
    for col in frame.columns:
        if frame[col].isna().all():
            frame[col] = frame[col].astype(float)
    return frame


def write_table(out: Path, rows: Sequence[dict[str, Any]]) -> list[Path]:
    """``results.csv`` always, ``results.parquet`` too when pyarrow is installed."""
    frame = table_frame(rows)
    paths = [Path(out) / "results.csv"]
    write_atomic(paths[0], frame.to_csv(index=False))
    try:
        import pyarrow  # noqa: F401  (optional: the `cluster` extra installs it)
    except ImportError:
        return paths
    parquet = Path(out) / "results.parquet"
    tmp = parquet.with_name(f".{parquet.name}.{os.getpid()}{TMP_SUFFIX}")
    try:
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, parquet)
    except OSError as exc:
        raise NightjarInputError(f"cannot write to {parquet}: {exc.strerror or exc}") from None
    finally:
        tmp.unlink(missing_ok=True)
    return [*paths, parquet]


def load_table(folder: Path) -> pd.DataFrame:
    """The table of a finished sweep folder (parquet when present, else CSV)."""
    folder = as_path(folder, "sweep folder")
    check_folder(folder, f"sweep folder {folder}")
    if not os.path.lexists(folder / SPEC_FILE):
        raise NightjarInputError(f"{folder} is not a sweep folder: missing {SPEC_FILE}")
    check_regular(folder / SPEC_FILE, f"{folder / SPEC_FILE}")
    parquet, csv = folder / "results.parquet", folder / "results.csv"
    try:
        if os.path.lexists(parquet):
            try:
                with open_regular(parquet, f"{parquet}") as f:
                    return pd.read_parquet(f)
            except ImportError:
                pass
        with open_regular(csv, f"{csv}") as f:
            return pd.read_csv(f)
    except (OSError, ValueError, pd.errors.ParserError) as exc:
        if isinstance(exc, NightjarInputError):
            raise
        raise NightjarInputError(f"{folder}: unreadable sweep table ({exc})") from None
