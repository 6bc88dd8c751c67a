"""The terminal summary table: one row per policy, fits in 120 columns.

Paired statistics share a column as ``mean/p99`` to stay compact; units sit in the
header (TTFT and E2E in seconds, TPOT in milliseconds). On consoles narrower than
that (piped output is 80 columns) the table shows means only.
"""

from __future__ import annotations

import math
from typing import TypeVar

from rich import box
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table

from nightjar.results.metrics import Stat, Summary
from nightjar.results.multiseed import METRICS, Aggregate, Metric
from nightjar.results.regret import Yardsticks

T = TypeVar("T", bound=Table)


def fmt_num(value: float, scale: float = 1.0) -> str:
    """Three significant figures, no exponent for the ranges these metrics take."""
    if not math.isfinite(value):
        return "-"
    v = value * scale
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    if abs(v) >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def fmt_pair(stat: Stat, scale: float = 1.0) -> str:
    return f"{fmt_num(stat.mean, scale)}/{fmt_num(stat.p99, scale)}"


class _FitTable(Table):
    """A Table that renders a narrower variant when the console is too narrow for it.

    Rich would otherwise squeeze every column into "1…" ellipses (piped output is
    80 columns wide); dropping the p99 halves keeps every number legible instead.
    """

    narrow: Table | None = None

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        wanted = self.__rich_measure__(console, options.update(width=10_000)).maximum
        if self.narrow is not None and wanted > options.max_width:
            return self.narrow.__rich_console__(console, options)
        return super().__rich_console__(console, options)


def yardstick_caption(yardsticks: dict[str, Yardsticks] | None) -> str:
    """What the yardstick columns are against, for under a table."""
    if not yardsticks:
        return ""
    parts = []
    if any(math.isfinite(y.bound_pct) for y in yardsticks.values()):
        parts.append("bound gap: per-token latency over the bound's, conditional on the"
                     " run's own batches and KV pool (the best gamma schedule on them, rebuilds"
                     " charged)")
    statics = sorted({y.static for y in yardsticks.values() if y.static})
    if statics:
        parts.append(f"gain: per-token latency below the best static run ({', '.join(statics)})")
    return "; ".join(parts)


def summary_table(
    summaries: list[Summary],
    yardsticks: dict[str, Yardsticks] | None = None,
    title: str | None = None,
) -> Table:
    """Rows = policies; ``yardsticks`` is keyed by policy spec (``Summary.policy``)."""
    table = _build(_FitTable, summaries, yardsticks, title, wide=True)
    table.narrow = _build(Table, summaries, yardsticks, title, wide=False)
    return table


def _build(
    cls: type[T],
    summaries: list[Summary],
    yardsticks: dict[str, Yardsticks] | None,
    title: str | None,
    wide: bool,
) -> T:
    show_done = any(s.requests_finished < s.requests_total for s in summaries)
    show_offloads = any("offloads" in s.extra for s in summaries)
    ys = yardsticks or {}
    show_bound = any(math.isfinite(y.bound_pct) for y in ys.values())
    show_gain = any(y.static for y in ys.values())
    # The SLO thresholds and the yardsticks sit under the table: goodput, SLO %, regret
    # and gain mean nothing without them.
    slos = sorted({s.slo.describe() for s in summaries})
    caption = "; ".join([*slos, *([yardstick_caption(ys)] if ys else [])])
    # SIMPLE_HEAD already puts a space between columns; narrow consoles get no padding
    # on top, or rich silently crops the last columns (offloads, regret) at 80.
    table = cls(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                caption=caption or None, padding=(0, 1) if wide else (0, 0))
    # Short specs (nightjar-code, nightjar+) must not fold; long parametric ones may.
    longest = max((len(part) for s in summaries for part in s.policy.split("@")), default=8)
    table.add_column("policy", overflow="fold", min_width=min(max(longest, 8), 13),
                     max_width=24)
    stat = "mean/p99" if wide else "mean"
    headers = ["tok/s", f"TTFT s\n{stat}", f"TPOT ms\n{stat}", f"E2E s\n{stat}"]
    # Goodput (req/s) and SLO attainment share a column; narrow consoles keep only
    # the attainment.
    headers += ["done"] * show_done + ["good/s\n/SLO %" if wide else "SLO\n%"]
    headers += ["pre-\nempts", "sw/\nmin", "spec\n%"]
    # Regret (vs the bound) and gain (vs the best static run) share a column as
    # ``regret/gain``; narrow consoles keep the regret.
    pair = show_bound and show_gain and wide
    if pair:
        headers.append("bound/\ngain %")
    else:
        headers += ["bound\ngap %"] * show_bound + ["gain\n%"] * (show_gain and not show_bound)
    headers += ["off-\nloads"] * show_offloads
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)

    best = max(
        (s.throughput_tok_s for s in summaries if math.isfinite(s.throughput_tok_s)),
        default=math.nan,
    )

    def lat(stat: Stat, scale: float = 1.0) -> str:
        return fmt_pair(stat, scale) if wide else fmt_num(stat.mean, scale)

    for s in summaries:
        tput = fmt_num(s.throughput_tok_s)
        if s.throughput_tok_s == best and len(summaries) > 1:
            tput = f"[bold green]{tput}[/]"
        # A run variant goes on a line of its own (fixed:1 / @offload=off) rather than
        # folding mid-word.
        row = [s.policy.replace("@", "\n@"), tput, lat(s.ttft_s), lat(s.tpot_s, 1e3), lat(s.e2e_s)]
        row += [f"{s.requests_finished}/{s.requests_total}"] * show_done
        slo_pct = fmt_num(s.slo_attainment, 100.0)
        if wide:  # whole percents keep the pair narrow enough for 120 columns
            pct = f"{s.slo_attainment * 100:.0f}" if math.isfinite(s.slo_attainment) else "-"
            slo_pct = f"{fmt_num(s.goodput_req_s)}/{pct}"
        row.append(slo_pct)
        row += [
            str(s.preemptions),
            fmt_num(s.switches_per_min),
            fmt_num(s.spec_time_share, 100.0),
        ]
        y = ys.get(s.policy)
        if pair:
            row.append(f"{fmt_num(y.bound_pct)}/{fmt_num(y.static_gain_pct)}" if y else "-")
        elif show_bound:
            row.append(fmt_num(y.bound_pct) if y is not None else "-")
        elif show_gain:
            row.append(fmt_num(y.static_gain_pct) if y is not None else "-")
        if show_offloads:
            value = s.extra.get("offloads")
            row.append(str(int(value)) if value is not None else "-")
        table.add_row(*row)
    return table


# Shown on consoles too narrow for every metric (piped output is 80 columns).
_NARROW = ("throughput_tok_s", "e2e_s_mean", "regret_bound_pct")


def interval_table(agg: Aggregate, title: str | None = None, caption: str | None = None) -> Table:
    """The terminal table: mean ± 95% half-width per policy and metric.

    On a console too narrow for every metric it shows throughput, mean E2E and
    regret vs the bound only, rather than squeezing the policy names away.
    """
    table = _build_intervals(_FitTable, agg, title, [m for m in METRICS], caption)
    table.narrow = _build_intervals(
        Table, agg, title, [m for m in METRICS if m.key in _NARROW], caption
    )
    return table


def _build_intervals(
    cls: type[T], agg: Aggregate, title: str | None, metrics: list[Metric], caption: str | None
) -> T:
    table = cls(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True,
                caption=caption)
    table.add_column("policy", overflow="fold", min_width=8, max_width=30)
    shown = [m for m in metrics if any(math.isfinite(agg[p][m.key].mean) for p in agg)]
    for m in shown:
        table.add_column(m.label, justify="right", no_wrap=True)
    for policy, ivs in agg.items():
        table.add_row(policy, *[ivs[m.key].format(m.fmt) for m in shown])
    return table
