"""Read one run's folder back (``requests``, ``steps`` and ``summary.json``), CSV or parquet.

The reverse of :func:`nightjar.results.write.write_run` for every engine: the records come
back column for column, and the summary's engine-specific scalars (offload counts,
wall time, ...) come back as ``RunResult.extra``.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from nightjar.core.records import RequestRecord, RunResult, StepRecord
from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError
from nightjar.results.metrics import Stat, Summary

# Columns of summary.json that are not engine extras.
_ROW_KEYS = {
    "slug", "profile", "seed", "ptl_s", "regret_bound_pct", "static_yardstick",
    "gain_static_pct", "step_oracle_pct", "step_oracle_s",
}


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
        return pd.read_parquet(path)
    except ImportError:
        raise NightjarInputError(f"{path}: reading parquet needs pyarrow") from None


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
    if not summary.is_file():
        raise NightjarInputError(f"{folder} is not a nightjar run folder: missing summary.json")
    try:
        meta = json.loads(summary.read_text(encoding="utf-8"))
        if not isinstance(meta, dict):
            raise ValueError("summary.json is not an object")
        known = _summary_keys() | _ROW_KEYS
        extra = {k: float(v) for k, v in meta.items()
                 if k not in known and isinstance(v, int | float) and not isinstance(v, bool)}
        ttft, tpot = meta.get("slo_ttft_s"), meta.get("slo_tpot_s")
        slo = Slo(float(ttft), float(tpot)) if ttft is not None and tpot is not None else None
        if (folder / "requests.parquet").is_file():
            run = RunResult(
                policy=str(meta["policy"]), engine=str(meta["engine"]),
                trace=str(meta["trace"]), profile=str(meta.get("profile", "")),
                seed=int(meta.get("seed", 0)), duration_s=float(meta["duration_s"]),
                requests=_table(folder / "requests.parquet", RequestRecord),
                steps=_table(folder / "steps.parquet", StepRecord),
            )
        else:
            run = load_run(folder)
    except (KeyError, ValueError, TypeError, OSError) as exc:
        raise NightjarInputError(f"{folder}: unreadable run folder ({exc})") from None
    run.extra = extra
    return run, slo


def load_run(folder: Path) -> RunResult:
    """Read back a run folder written by ``nightjar.results.write.write_run``."""
    paths = {n: folder / n for n in ("requests.csv", "steps.csv", "summary.json")}
    missing = [str(p) for p in paths.values() if not p.is_file()]
    if missing:
        raise NightjarInputError(f"{folder} is not a nightjar run folder: missing {missing[0]}")
    try:
        meta = json.loads(paths["summary.json"].read_text())
        requests = pd.read_csv(paths["requests.csv"])
        steps = pd.read_csv(paths["steps.csv"])
        result = RunResult(
            policy=str(meta["policy"]), engine=str(meta["engine"]), trace=str(meta["trace"]),
            profile=str(meta.get("profile", "")), seed=int(meta.get("seed", 0)),
            duration_s=float(meta["duration_s"]),
            requests=_records(requests, RequestRecord, paths["requests.csv"]),
            steps=_records(steps, StepRecord, paths["steps.csv"]),
        )
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


def load_runs(folder: Path) -> list[RunResult]:
    """One run folder, or a folder of them (``nightjar live --out DIR``: DIR/<policy>)."""
    if (folder / "summary.json").is_file():
        return [load_run(folder)]
    subs = sorted(p for p in folder.iterdir() if (p / "summary.json").is_file()) if (
        folder.is_dir()
    ) else []
    if not subs:
        raise NightjarInputError(
            f"{folder} is not a nightjar run folder nor a folder of them: missing summary.json"
        )
    return [load_run(p) for p in subs]
