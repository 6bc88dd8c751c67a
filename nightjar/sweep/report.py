"""The sweep's HTML report and terminal table: means over seeds with 95% intervals.

The report is self-contained (plotly.js inlined once): the SLO thresholds, one table
per trace (series x rate scale), and the load-latency, throughput/goodput and SLO
attainment curves of :mod:`nightjar.sweep.figures`.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd
from plotly.offline import get_plotlyjs
from rich import box
from rich.table import Table

from nightjar.results.stats import Interval
from nightjar.sweep.baseline import COLUMNS as PAIRED_COLUMNS
from nightjar.sweep.baseline import cell_text, paired_frame
from nightjar.sweep.figures import aggregate, sweep_figures
from nightjar.sweep.store import write_atomic

# (column, header, format, display scale)
COLUMNS = (
    ("throughput_tok_s", "tok/s", "{:.0f}", 1.0),
    ("goodput_req_s", "goodput req/s", "{:.2f}", 1.0),
    ("slo_attainment", "SLO %", "{:.1f}", 100.0),
    ("ttft_s_p99", "TTFT p99 s", "{:.2f}", 1.0),
    ("tpot_s_p99", "TPOT p99 ms", "{:.0f}", 1e3),
)


def slo_line(frame: pd.DataFrame) -> str:
    pairs = sorted(set(zip(frame["slo_ttft_s"], frame["slo_tpot_s"], strict=True)))
    return "; ".join(f"SLO: TTFT <= {t:g} s, TPOT <= {p * 1e3:g} ms" for t, p in pairs)


def summary_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (trace, series, rate scale): formatted ``mean ± half-width`` strings."""
    agg = aggregate(frame, [c[0] for c in COLUMNS])
    out = agg[["trace", "series", "rate_scale", "rate_rps", "n"]].copy()
    out["rate_rps"] = out["rate_rps"].map(lambda v: f"{v:.2f}")
    for col, header, fmt, scale in COLUMNS:
        out[header] = [
            Interval(m * scale, lo * scale, hi * scale, int(n)).format(fmt)
            for m, lo, hi, n in zip(agg[col], agg[f"{col}_lo"], agg[f"{col}_hi"], agg["n"],
                                    strict=True)
        ]
    return out.drop(columns=[c[0] for c in COLUMNS], errors="ignore")


def terminal_table(frame: pd.DataFrame, title: str) -> Table:
    """Compact: ``mean±half`` without spaces, the trace column only when it varies."""
    cells = summary_cells(frame)
    one_trace = cells["trace"].nunique() == 1
    if one_trace:
        title = f"{title}: {cells['trace'].iloc[0]}"
    table = Table(title=title, caption=slo_line(frame), box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    heads = ["trace"] * (not one_trace) + ["series", "scale", "req/s", "n"]
    heads += [c[1].replace("goodput ", "good\n").replace(" p99", "\np99") for c in COLUMNS]
    for k, head in enumerate(heads):
        left = k < 2 - one_trace
        table.add_column(head, justify="left" if left else "right", no_wrap=not left,
                         overflow="fold")
    for row in cells.itertuples(index=False):
        values = [str(v).replace(" ± ", "±") for v in row]
        values[2] = f"{float(values[2]):g}"
        table.add_row(*values[one_trace:])
    return table


def paired_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """Per (trace, series, rate scale): each paired column as ``diff±half`` (``*``:
    the interval excludes zero), against the baseline series; empty with one series."""
    pairs = paired_frame(frame)
    if pairs.empty:
        return pd.DataFrame()
    rows = []
    for (trace, series, scale, base), group in pairs.groupby(
            ["trace", "series", "rate_scale", "baseline"], sort=False):
        by = {r["metric"]: r for _, r in group.iterrows()}
        row = {"trace": trace, "series": series, "baseline": base, "rate_scale": scale,
               "n": int(group["n"].max())}
        for col, header, k in PAIRED_COLUMNS:
            row[header] = cell_text(by[col], k)
        rows.append(row)
    return pd.DataFrame(rows)


def paired_table(frame: pd.DataFrame) -> Table | None:
    """The series against the baseline, paired per seed (None with one series)."""
    cells = paired_cells(frame)
    if cells.empty:
        return None
    base = str(cells["baseline"].iloc[0])
    seeds = "/".join(map(str, sorted(set(cells["n"]))))
    table = Table(title=f"series - {base}, paired per seed",
                  caption=f"mean difference ± 95% half-width over {seeds} shared seeds; *"
                  " where the interval excludes zero", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)
    one_trace = cells["trace"].nunique() == 1
    heads = ["trace"] * (not one_trace) + ["series", "scale"]
    heads += [c[1].replace(" p99", "\np99") for c in PAIRED_COLUMNS]
    for k, head in enumerate(heads):
        # Folded rather than cropped where a console is narrow: a cropped digit misleads.
        table.add_column(head, justify="left" if k < 2 - one_trace else "right",
                         overflow="fold")
    for row in cells.itertuples(index=False):
        values = [str(v) for v in row]
        del values[4]  # the seed count: in the caption
        del values[2]  # the baseline: in the title
        values[2] = f"{float(values[2]):g}"
        table.add_row(*values[one_trace:])
    return table


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
    "table{border-collapse:collapse;font-size:13px}td,th{padding:4px 8px;"
    "border-bottom:1px solid #ddd;text-align:right}td:nth-child(-n+2),th:nth-child(-n+2)"
    "{text-align:left}.note{color:#666;font-size:13px}"
)


def _html_table(cells: pd.DataFrame) -> str:
    heads = ["trace", "series", "rate scale", "offered req/s", "seeds", *[c[1] for c in COLUMNS]]
    ths = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in cells.itertuples(index=False)
    )
    return f"<table><thead><tr>{ths}</tr></thead><tbody>{body}</tbody></table>"


def _paired_html(frame: pd.DataFrame) -> str:
    cells = paired_cells(frame)
    if cells.empty:
        return ""
    base = str(cells["baseline"].iloc[0])
    heads = ["trace", "series", "rate scale", "seeds", *[c[1] for c in PAIRED_COLUMNS]]
    ths = "".join(f"<th>{html.escape(h)}</th>" for h in heads)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row) + "</tr>"
        for row in cells.drop(columns=["baseline"]).itertuples(index=False)
    )
    note = (f"Each series minus {base}, paired per seed (every series of a seed shares its"
            " arrivals and acceptance draws): the mean difference ± the half-width of its"
            " 95% t interval; * where the interval excludes zero.")
    return (f"<h2>Against {html.escape(base)}, paired per seed</h2><p class='note'>"
            f"{html.escape(note)}</p><table><thead><tr>{ths}</tr></thead><tbody>{body}"
            "</tbody></table>")


def write_sweep_report(frame: pd.DataFrame, path: Path, title: str) -> Path:
    figs = "".join(
        f.to_html(full_html=False, include_plotlyjs=False) for f in sweep_figures(frame)
    )
    seeds = sorted(set(frame["seed"]))
    note = (
        f"{len(frame)} cells; seeds {', '.join(map(str, seeds))}. Values are means over "
        "seeds ± the half-width of their 95% t interval (shaded bands in the charts); "
        "where bands overlap, the data do not separate the series. Offered rate = "
        "requests / trace span after the rate scale."
    )
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script>"
        f"</head><body><h1>{html.escape(title)}</h1><p>{html.escape(slo_line(frame))}</p>"
        f"<p class='note'>{html.escape(note)}</p><h2>Summary</h2>"
        f"{_html_table(summary_cells(frame))}{_paired_html(frame)}<h2>Curves</h2>{figs}"
        "</body></html>"
    )
    write_atomic(Path(path), page)
    return Path(path)
