"""Read one run's folder back (``requests``, ``steps`` and ``summary.json``), CSV or parquet.

The reverse of :func:`nightjar.results.write.write_run` for every engine: the records come
back column for column, and the summary's engine-specific scalars (offload counts,
wall time, ...) come back as ``RunResult.extra``.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from nightjar.core.records import RequestRecord, RunResult, StepRecord
from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError
from nightjar.reading import as_path, check_folder, open_regular, read_json
from nightjar.results.metrics import Stat, Summary
from nightjar.results.provenance import KEYS as PROVENANCE

# Columns of summary.json that are not engine extras.
_ROW_KEYS = {
    "slug", "profile", "seed", "ptl_s", "regret_bound_pct", "static_yardstick",
    "gain_static_pct", "step_oracle_pct", "step_oracle_s",
}
# Prefixes of columns derived from the run set, recomputed when it is read back
# (nightjar.results.alternatives).
_DERIVED = ("alt_",)


def _summary_keys() -> set[str]:
    keys: set[str] = set()
    for f in fields(Summary):
        if f.name == "extra":
            continue
        if f.name in ("ttft_s", "tpot_s", "e2e_s"):
            keys |= {f"{f.name}_{s.name}" for s in fields(Stat)}
        elif f.name == "slo":
            keys |= {f"slo_{s.name}" for s in fields(Slo)}
        else:
            keys.add(f.name)
    return keys


def _parquet(path: Path) -> pd.DataFrame:
    try:
        with open_regular(path, f"{path}") as f:
            return pd.read_parquet(f)
    except ImportError:
        raise NightjarInputError(f"{path}: reading parquet needs pyarrow") from None


def _csv(path: Path) -> pd.DataFrame:
    with open_regular(path, f"{path}") as f:  # never blocks on a FIFO
        return pd.read_csv(f)


def _summary(path: Path) -> dict[str, Any]:
    meta = read_json(path, f"{path}")
    if not isinstance(meta, dict):
        raise NightjarInputError(f"{path}: not a run summary (expected a JSON object)")
    return meta


def _table(path: Path, cls: Any) -> list[Any]:
    return _records(_parquet(path), cls, path)


def read_run_folder(folder: Path) -> tuple[RunResult, Slo | None]:
    """The run in ``folder`` and the SLO its summary was computed with (if recorded).

    CSV folders are read by :func:`load_run` (one reader, one set of checks for
    ``nightjar validate`` and the API); parquet folders here, with the same typed,
    cell-checked conversion of every column.
    """
    folder = Path(folder)
    summary = folder / "summary.json"
    if not os.path.lexists(summary):
        raise NightjarInputError(f"{folder} is not a nightjar run folder: missing summary.json")
    try:
        meta = _summary(summary)
        known = _summary_keys() | _ROW_KEYS
        extra = {k: float(v) for k, v in meta.items()
                 if k not in known and k not in PROVENANCE and not k.startswith(_DERIVED)
                 and isinstance(v, int | float) and not isinstance(v, bool)}
        provenance = {k: v for k, v in meta.items() if k in PROVENANCE
                      and (v is None or isinstance(v, str | int | float | bool))}
        ttft, tpot = meta.get("slo_ttft_s"), meta.get("slo_tpot_s")
        slo = Slo(float(ttft), float(tpot)) if ttft is not None and tpot is not None else None
        if os.path.lexists(folder / "requests.parquet"):
            run = RunResult(
                policy=str(meta["policy"]), engine=str(meta["engine"]),
                trace=str(meta["trace"]), profile=str(meta.get("profile", "")),
                seed=int(meta.get("seed", 0)), duration_s=float(meta["duration_s"]),
                requests=_table(folder / "requests.parquet", RequestRecord),
                steps=_table(folder / "steps.parquet", StepRecord),
            )
        else:
            run = load_run(folder)
    except NightjarInputError:
        raise
    except (KeyError, ValueError, TypeError, OSError) as exc:
        raise NightjarInputError(f"{folder}: unreadable run folder ({exc})") from None
    run.extra = extra
    run.provenance = provenance
    return run, slo


def load_run(folder: Path) -> RunResult:
    """Read back a run folder written by ``nightjar.results.write.write_run``."""
    paths = {n: folder / n for n in ("requests.csv", "steps.csv", "summary.json")}
    missing = [str(p) for p in paths.values() if not os.path.lexists(p)]
    if missing:
        raise NightjarInputError(f"{folder} is not a nightjar run folder: missing {missing[0]}")
    try:
        meta = _summary(paths["summary.json"])
        requests = _csv(paths["requests.csv"])
        steps = _csv(paths["steps.csv"])
        result = RunResult(
            policy=str(meta["policy"]), engine=str(meta["engine"]), trace=str(meta["trace"]),
            profile=str(meta.get("profile", "")), seed=int(meta.get("seed", 0)),
            duration_s=float(meta["duration_s"]),
            requests=_records(requests, RequestRecord, paths["requests.csv"]),
            steps=_records(steps, StepRecord, paths["steps.csv"]),
        )
    except NightjarInputError:
        raise
    except (KeyError, ValueError, TypeError, OverflowError, RecursionError,
            UnicodeDecodeError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise NightjarInputError(f"{folder}: unreadable run folder ({exc})") from None
    return result


def _records(frame: pd.DataFrame, cls: Any, path: Path) -> list[Any]:
    names = [f.name for f in fields(cls) if f.name in frame.columns]
    required = {
        f.name for f in fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    absent = required - set(names)
    if absent:
        raise ValueError(f"missing column {sorted(absent)[0]}")
    kinds = {f.name: str(f.type) for f in fields(cls)}
    cols = {name: _column(frame[name], kinds[name], path, name) for name in names}
    return [cls(**dict(zip(names, row, strict=True))) for row in zip(*cols.values(), strict=True)]


def _column(col: pd.Series, kind: str, path: Path, name: str) -> list[Any]:
    """A CSV column as the record field's type; a cell that is not one is an error."""
    if kind == "str":
        return [str(v) for v in col]
    if kind == "bool":
        text = col.astype(str).str.lower()
        bad = ~text.isin(["true", "false", "1", "0"])
        values: list[Any] = (text.isin(["true", "1"])).tolist()
    else:
        num = pd.to_numeric(col, errors="coerce")
        bad = num.isna() & col.notna()  # text that is not a number
        if kind == "int":
            # Integers: no gaps, no fractions, within int64.
            bad |= num.isna() | (num % 1 != 0) | (num.abs() > 2**62)
            values = num.fillna(0).astype("int64").tolist() if not bad.any() else []
        else:
            values = num.astype(float).tolist()
    if bad.any():
        i = int(bad.to_numpy().nonzero()[0][0])
        raise NightjarInputError(
            f"{path}: line {i + 2}: column {name} holds {str(col.iloc[i])[:40]!r}, "
            f"not {'an integer' if kind == 'int' else 'a ' + kind}"
        )
    return values


def run_folders(folder: Path) -> list[Path]:
    """The run folders ``folder`` stands for: itself when it is one, else its sub-folders
    that hold a run, in its summary table's order and only those the table lists.

    The summary table (``summary.csv`` or ``summary.parquet``) is written last, by the
    run that wrote the folder: a sub-folder it does not list belongs to no run of it
    (e.g. one left by a program that wrote into the folder by hand), so it is not read
    as part of the run.
    """
    folder = as_path(folder, "run folder")
    check_folder(folder, f"run folder {folder}")
    if os.path.lexists(folder / "summary.json"):
        return [folder]
    subs = sorted(p for p in folder.iterdir()
                  if os.path.lexists(p / "summary.json") and p.is_dir())
    if not subs:
        raise NightjarInputError(
            f"{folder} is not a nightjar run folder nor a folder of them: missing summary.json"
        )
    listed = _listed_slugs(folder)
    if listed is None:
        return subs
    by_name = {p.name: p for p in subs}
    missing = [s for s in listed if s not in by_name]
    if missing:
        raise NightjarInputError(
            f"{folder}: its summary lists run {missing[0]!r}, whose folder is missing")
    return [by_name[s] for s in listed]


def _listed_slugs(folder: Path) -> list[str] | None:
    """The ``slug`` column of the folder's summary table, or None without a table."""
    for name, read in (("summary.csv", _csv), ("summary.parquet", _parquet)):
        path = folder / name
        if not os.path.lexists(path):
            continue
        try:
            table = read(path)
        except NightjarInputError:
            raise
        except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
            raise NightjarInputError(f"{path}: unreadable summary table ({exc})") from None
        if "slug" not in table.columns:
            return None
        return [str(s) for s in table["slug"]]
    return None


def load_runs(folder: Path) -> list[RunResult]:
    """One run folder, or a folder of them (``nightjar live --out DIR``: DIR/<policy>)."""
    return [load_run(p) for p in run_folders(folder)]
