"""A live replay's results: its run set on the terminal (the summary table, the
full-system yardstick in words, the runs priced off their prior's grid) and in its
folder (:func:`nightjar.report.folder.write_all`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from nightjar.core.records import RunResult
from nightjar.core.slo import Slo
from nightjar.results.run_set import ResultSet


def report_live_runs(results: Sequence[RunResult], title: str, out: Path, *, gamma_max: int,
                     slo: Slo, offload: bool, movable: bool, report: bool = True,
                     report_cdn: bool = False, fmt: str = "csv") -> ResultSet:
    """Summarise, print and write the runs; returns their run set. No oracle and no
    bound on vLLM (the engine knows no true table): the yardstick is the best static
    run (nospec, fixed:G) among those replayed."""
    from rich.console import Console

    from nightjar.report.alt_lines import alternative_lines, entries
    from nightjar.report.folder import write_all
    from nightjar.report.off_grid import off_grid_lines
    from nightjar.report.terminal import summary_table

    result_set = ResultSet.build(
        list(results), title=title, oracle_policy=None, gamma_max=gamma_max, slo=slo,
        offload=offload, movable=movable,
    )
    Console().print(summary_table(result_set.summaries, result_set.yardsticks, title=title))
    for line in alternative_lines(entries(result_set), result_set.missing):
        Console().print(line, highlight=False)
    for line in off_grid_lines(results):
        Console(stderr=True).print(line)
    write_all(result_set, out, force=True, report=report, report_cdn=report_cdn, fmt=fmt)
    return result_set
