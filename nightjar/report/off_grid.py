"""The terminal's note on live runs whose step-time prior was looked up off its grid."""

from __future__ import annotations

from collections.abc import Iterable

from nightjar.core.records import RunResult


def off_grid_lines(results: Iterable[RunResult]) -> list[str]:
    """One line per live run whose policy looked the profile up off its grid (the
    summary's ``off_grid_lookups``, from ``Clamped``): those were priced at the edge, or
    past the largest batch along the table's last segment."""
    lines = []
    for r in results:
        lookups = int(r.extra.get("off_grid_lookups", 0.0))
        if lookups:
            steps = int(r.extra.get("off_grid_steps", 0.0))
            lines.append(
                f"{r.policy}: {lookups} profile lookups in {steps} steps lay outside the "
                "profile's table and were priced off its grid (off_grid_lookups)"
            )
    return lines
