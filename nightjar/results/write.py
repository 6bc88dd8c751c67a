"""Write a run's CSVs and summary into an output folder, without clobbering user files.

Layout (docs/outputs.md): ``<out>/.nightjar-run`` marker, ``<out>/summary.csv`` (one
row per policy), optionally ``<out>/report.html``, and per policy
``<out>/<slug>/{requests,steps}.csv`` and ``summary.json``. A folder holding the
marker was written by nightjar and may be written again; any other non-empty folder
is refused unless the caller forces it. Commands write through
:func:`nightjar.results.outdir.staged_out_dir`, so a folder appears only once complete.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from nightjar.core.records import RunResult
from nightjar.errors import NightjarInputError
from nightjar.results.outdir import check_out_dir, clear_earlier_run

if TYPE_CHECKING:
    from nightjar.results.run_set import PolicyRun, ResultSet

# Characters kept as they are in a slug; all portable in file names on every OS.
_SAFE = re.compile(r"[A-Za-z0-9.+-]")


def policy_slug(spec: str) -> str:
    """A readable, filesystem-safe folder name for a policy spec.

    ``fixed:3`` -> ``fixed-3``; ``schedule:1-16:3,17-64:1,65-:0`` ->
    ``schedule-1-16=3_17-64=1_65-=0``: the first ':' becomes '-', later ':' become
    '=' and ',' becomes '_'. Distinct specs get distinct slugs: when the spec holds
    a character that is not kept (or an '=' / '_' that the mapping also produces), a
    short hash of the spec is appended.
    """
    name, sep, arg = spec.strip().partition(":")
    mapped = arg.replace(":", "=").replace(",", "_")
    body = name + ("-" + mapped if sep else "")
    slug = "".join(c if _SAFE.match(c) or c in "=_" else "~" for c in body)
    lossy = "~" in slug or any(c in "=_" for c in name + arg) or not slug.strip(".")
    if lossy:
        slug = slug.replace("~", "") + "-" + hashlib.sha1(spec.encode()).hexdigest()[:6]
    return slug


@contextmanager
def _writing(path: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise NightjarInputError(f"cannot write to {path}: {exc.strerror or exc}") from None


def prepare_out_dir(path: Path, force: bool = False, *, replace: bool = False) -> Path:
    """Create ``path`` and mark it as a nightjar output folder, for writers that write
    into it in place (``nightjar live`` streams its logs there while vLLM runs).

    Refuses an existing non-empty folder unless ``force``, also one holding an
    earlier nightjar run: nothing the user has is overwritten without asking. With
    ``replace``, an earlier nightjar run there is removed first (``--force``: the
    folder then holds only the new run; the user's own files stay); so is one that
    never completed, without asking. The folder's lock is held until the process ends,
    and the folder is marked unfinished until the writer calls
    :func:`nightjar.results.outdir.mark_finished`. A folder this process holds and has
    not finished is left as it is: its run is still writing there (``nightjar live``
    writes its tables beside the log it streamed).
    """
    from nightjar.results.lock import held, hold_until_exit
    from nightjar.results.outdir import TMP_TAG, mark_unfinished, resolve_target, unfinished_run

    path = Path(path)
    mine = resolve_target(path)
    if held(mine) and unfinished_run(mine, theirs=True):
        return path
    real = check_out_dir(path, force)
    if TMP_TAG not in real.name:  # a staged folder is its own process's alone
        hold_until_exit(real, path)
    with _writing(path):
        real.mkdir(parents=True, exist_ok=True)
        if replace or unfinished_run(real):
            clear_earlier_run(real)
        mark_unfinished(real)
    return path


def _json_safe(value: Any) -> Any:
    # JSON has no NaN/inf; null says "undefined" (e.g. TPOT with only 1-token outputs).
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def summary_row(run: PolicyRun) -> dict[str, Any]:
    """The flat summary of one run, plus its yardsticks (:mod:`nightjar.results.regret`):
    ``regret_bound_pct`` (vs the bound), ``gain_static_pct`` against ``static_yardstick``
    and, with an oracle run, ``step_oracle_pct`` / ``step_oracle_s``; against the best
    static alternative per user metric (:mod:`nightjar.results.alternatives`),
    ``alt_<metric>_pct`` and the alternative ``alt_<metric>_best``; then the run's
    provenance (:mod:`nightjar.results.provenance`), where it has one."""
    flat = run.summary.as_dict()
    head = {k: flat.pop(k) for k in ("policy", "engine", "trace")}
    result = run.result
    row: dict[str, Any] = {**head, "profile": result.profile, "seed": result.seed, **flat}
    if run.yardsticks is not None:
        y = run.yardsticks
        row.update(ptl_s=y.ptl_s, regret_bound_pct=y.bound_pct, static_yardstick=y.static,
                   gain_static_pct=y.static_gain_pct)
    if run.regret is not None:
        reg = run.regret
        row.update(step_oracle_pct=reg.percent, step_oracle_s=reg.absolute_s)
    for key, alt in (run.alternatives or {}).items():
        row[f"alt_{key}_pct"] = alt.pct
        row[f"alt_{key}_best"] = alt.best
    row.update(result.provenance)
    return row


def require_format(fmt: str) -> None:
    """Fail before any work when ``fmt`` cannot be written here."""
    if fmt not in ("csv", "parquet"):
        raise NightjarInputError(f"unknown table format {fmt!r} (csv or parquet)")
    if fmt == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise NightjarInputError(
                "--format parquet needs pyarrow: pip install pyarrow (or 'nightjar[cluster]')"
            ) from None


def write_frame(frame: pd.DataFrame, stem: Path, fmt: str = "csv") -> Path:
    """``<stem>.csv``, or ``<stem>.parquet`` with ``fmt="parquet"`` (needs pyarrow)."""
    require_format(fmt)
    if fmt == "parquet":
        path = stem.with_suffix(".parquet")
        frame.to_parquet(path, index=False)
        return path
    path = stem.with_suffix(".csv")
    frame.to_csv(path, index=False)
    return path


def write_run(run: PolicyRun, out_dir: Path, fmt: str = "csv") -> list[Path]:
    """Write ``requests.csv``, ``steps.csv`` and ``summary.json`` for one run
    (``requests.parquet`` and ``steps.parquet`` with ``fmt="parquet"``).

    ``out_dir`` should come from :func:`prepare_out_dir`; the run's folder is its
    slug. Returns the written paths.
    """
    folder = Path(out_dir) / run.slug
    with _writing(folder):
        folder.mkdir(parents=True, exist_ok=True)
        paths = [
            write_frame(run.result.requests_frame(), folder / "requests", fmt),
            write_frame(run.result.steps_frame(), folder / "steps", fmt),
            folder / "summary.json",
        ]
        record = {k: _json_safe(v) for k, v in summary_row(run).items()}
        paths[2].write_text(json.dumps(record, indent=2) + "\n")
    return paths


def unique_slugs(results: Sequence[RunResult]) -> list[str]:
    """Slugs for runs written side by side; a repeated policy (e.g. the same spec on
    the sim and live engines) gets its engine, then a counter, appended."""
    slugs: list[str] = []
    for result in results:
        slug = policy_slug(result.policy)
        if slug in slugs:
            slug = f"{slug}-{result.engine}"
        base, n = slug, 2
        while slug in slugs:
            slug, n = f"{base}-{n}", n + 1
        slugs.append(slug)
    return slugs


def write_summary_csv(results: ResultSet, out_dir: Path, fmt: str = "csv") -> Path:
    """Write ``summary.csv`` (or ``summary.parquet``): one row per run (with regret
    columns where it has one)."""
    rows = [{"slug": run.slug, **summary_row(run)} for run in results.runs]
    with _writing(Path(out_dir) / "summary"):
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        return write_frame(pd.DataFrame(rows), Path(out_dir) / "summary", fmt)
