"""Read one run's folder back (``requests``, ``steps`` and ``summary.json``), CSV or parquet.

The reverse of :func:`nightjar.results.write.write_run` for every engine: the records come
back column for column, and the summary's engine-specific scalars (offload counts,
wall time, ...) come back as ``RunResult.extra``.
"""

from __future__ import annotations

import json
from dataclasses import fields
from pathlib import Path
from typing import Any

import pandas as pd

from nightjar.core.records import RequestRecord, RunResult, StepRecord
from nightjar.errors import NightjarInputError
from nightjar.results.metrics import Slo, Stat, Summary

# The CSV reader's typed, cell-checked conversion serves parquet tables too.
from nightjar.validate import _records as records_of

# Columns of summary.json that are not engine extras.
_ROW_KEYS = {"slug", "profile", "seed", "regret_pct", "regret_s", "ptl_s"}


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
    return records_of(_parquet(path), cls, path)


def read_run_folder(folder: Path) -> tuple[RunResult, Slo | None]:
    """The run in ``folder`` and the SLO its summary was computed with (if recorded).

    CSV folders are read by :func:`nightjar.validate.load_run` (one reader, one set of
    checks for ``nightjar validate`` and the API); parquet folders here.
    """
    from nightjar.validate import load_run

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
