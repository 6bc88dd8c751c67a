"""The top-level page of a ``sim --seeds N`` folder: every policy's mean and 95%
interval over the seeds, the paired verdicts and regrets the terminal printed, and a
link to each seed's own report. Plain HTML (no script): it opens anywhere."""

from __future__ import annotations

import html
import math
from pathlib import Path

from nightjar.results.multiseed import METRICS, Aggregate
from nightjar.results.outdir import plain_file_mode

_STYLE = ("body{font:13px system-ui,sans-serif;max-width:1200px;margin:1.5em auto;"
          "padding:0 1em}table{border-collapse:collapse}th,td{padding:3px 10px;"
          "border-bottom:1px solid #e6e6e6;text-align:right}th:first-child,td:first-child"
          "{text-align:left}caption{caption-side:bottom;color:#888;padding-top:6px}")


def seeds_page(agg: Aggregate, title: str, lines: list[str], reports: list[str]) -> str:
    """The page: ``lines`` are the paired verdicts and regret lines, ``reports`` the
    seeds' report paths, relative to the page."""
    shown = [m for m in METRICS if any(math.isfinite(agg[p][m.key].mean) for p in agg)]
    head = "".join(f"<th>{html.escape(m.label)}</th>" for m in shown)
    body = "".join(
        f"<tr><td>{html.escape(p)}</td>"
        + "".join(f"<td>{html.escape(ivs[m.key].format(m.fmt))}</td>" for m in shown)
        + "</tr>"
        for p, ivs in agg.items()
    )
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    links = " ".join(f'<a href="{html.escape(r)}">{html.escape(r)}</a>' for r in reports)
    return (
        f"<!doctype html><meta charset=utf-8><title>{html.escape(title)}</title>"
        f"<style>{_STYLE}</style><h1>{html.escape(title)}</h1>"
        f"<table><thead><tr><th>policy</th>{head}</tr></thead><tbody>{body}</tbody>"
        "<caption>mean ± 95% t half-width over the seeds; every policy of a seed sees the "
        "same arrivals and acceptance draws, so differences are judged paired per seed "
        f"(below)</caption></table><ul>{items}</ul>"
        + (f"<p>Each seed's report: {links}</p>" if links else "")
    )


def write_seeds_page(path: Path, agg: Aggregate, title: str, lines: list[str],
                     reports: list[str]) -> Path:
    path.write_text(seeds_page(agg, title, lines, reports), encoding="utf-8")
    path.chmod(plain_file_mode())
    return path
