"""A run set's whole output folder: every run's tables, the summary, and the HTML report.

The tables are :mod:`nightjar.results.write`'s; this module adds the report on top, so
that results never import the report (which reads results).
"""

from __future__ import annotations

from pathlib import Path

from nightjar.results.outdir import mark_finished
from nightjar.results.run_set import ResultSet
from nightjar.results.write import prepare_out_dir, write_run, write_summary_csv


def write_all(
    results: ResultSet,
    out_dir: Path,
    *,
    force: bool = False,
    report: bool = False,
    report_cdn: bool = False,
    fmt: str = "csv",
) -> list[Path]:
    """Prepare ``out_dir`` and write every run plus the comparison; the CLI's one call.

    ``fmt="parquet"`` writes the tables as parquet instead of CSV (``--format``).

    With ``report``, also writes ``report.html`` (see :mod:`nightjar.report.page`), with
    plotly.js loaded from its CDN when ``report_cdn``. Nothing is recomputed: the
    summaries and regrets come with ``results``.
    """
    prepare_out_dir(out_dir, force)
    paths: list[Path] = []
    for run in results.runs:
        paths += write_run(run, out_dir, fmt)
    paths.append(write_summary_csv(results, out_dir, fmt))
    if report:
        # Imported here: plotly is slow to import and only the report needs it.
        from nightjar.report.page import write_report

        paths.append(write_report(results, Path(out_dir) / "report.html", cdn=report_cdn))
    mark_finished(out_dir)
    return paths
