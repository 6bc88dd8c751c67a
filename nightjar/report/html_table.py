"""The report's summary table: the terminal table's columns plus a few more."""

from __future__ import annotations

import html
import math

from nightjar.report.terminal import fmt_num, fmt_pair
from nightjar.results.run_set import PolicyRun

HEAD = (
    ("policy", ""),
    ("done", "finished / total requests"),
    ("tok/s", "output tokens per second"),
    ("TTFT s|mean/p99", "time to first token, seconds: mean / p99"),
    ("TPOT ms|mean/p99", "time per output token, milliseconds: mean / p99"),
    ("E2E s|mean/p99", "end-to-end latency, seconds: mean / p99"),
    ("goodput|req/s", "finished requests meeting both SLO limits, per second"),
    ("SLO|%", "requests meeting both SLO limits / all requests, %"),
    ("pre-empts", "preemptions"),
    ("accept", "accepted / drafted tokens"),
    ("mean|gamma", "step-weighted mean gamma over decode steps"),
    ("sw/min", "gamma switches per minute"),
    ("spec|%", "share of decode time spent speculating"),
    ("peak|KV %", "peak KV cache usage"),
)


# The full-system regret columns: (metric key, short head, label).
ALT_COLUMNS = (("e2e_s_mean", "E2E", "mean E2E"), ("throughput_tok_s", "tok/s", "throughput"))


# Which way each column is better: "min", "max", or None (it describes, it ranks
# nothing), by head; the best finite value of a ranked column is marked.
BETTER = {
    "tok/s": "max", "TTFT s|mean/p99": "min", "TPOT ms|mean/p99": "min",
    "E2E s|mean/p99": "min", "goodput|req/s": "max", "SLO|%": "max", "pre-empts": "min",
    "bound|gap %": "min", "gain|static %": "max", "vs step-|oracle %": "min",
    **{f"{short}|vs best alt %": "min" for _, short, _ in ALT_COLUMNS},
}

# Clicking a column head sorts the rows by its cells' ``data-v`` (numbers where they
# parse, the policy's name otherwise; cells with none go last), again to reverse.
SORT_SCRIPT = (
    "<script>document.querySelectorAll('table.summary').forEach(function(t){"
    "var hs=t.tHead.rows[0].cells;Array.prototype.forEach.call(hs,function(h,i){"
    "h.addEventListener('click',function(){var up=h.getAttribute('data-dir')!=='up';"
    "Array.prototype.forEach.call(hs,function(o){o.removeAttribute('data-dir');});"
    "h.setAttribute('data-dir',up?'up':'down');var b=t.tBodies[0];"
    "var rows=Array.prototype.slice.call(b.rows);rows.sort(function(r,q){"
    "var x=r.cells[i].getAttribute('data-v'),y=q.cells[i].getAttribute('data-v');"
    "if(x===null||y===null){return (x===null)-(y===null);}"
    "var m=parseFloat(x),n=parseFloat(y);"
    "var c=isNaN(m)||isNaN(n)?x.localeCompare(y):m-n;return up?c:-c;});"
    "rows.forEach(function(r){b.appendChild(r);});});});});</script>"
)

Cell = tuple[str, float]  # the text shown, the value it sorts and ranks by (NaN: none)


def summary_html(runs: list[PolicyRun], colors: dict[str, str]) -> str:
    """The summary table: a column head's tooltip says what it means, a click sorts by
    it, and each ranked column's best value is shaded (``SORT_SCRIPT`` does the sort)."""
    ys = [r.yardsticks for r in runs]
    with_bound = any(y is not None and y.bound_pct == y.bound_pct for y in ys)
    with_gain = any(y is not None and y.static for y in ys)
    with_oracle = any(r.regret is not None for r in runs)
    with_alt = any(r.alternatives for r in runs)
    head = [*HEAD]
    head += [(f"{short}|vs best alt %", f"{label}: regret against the best static alternative"
              " of the same seed (nospec with no draft loaded, fixed:G, their elastic-memory"
              " variants), %; > 0 behind it (the terminal summary names the alternative)")
             for _, short, label in ALT_COLUMNS] * with_alt
    head += [("bound|gap %", "per-token latency over the bound's - 1, %; conditional"
              " on the run's own batches and KV pool (the best gamma schedule on them, rebuilds"
              " charged): the full-system regret is against the alternatives")] * with_bound
    head += [("gain|static %", "per-token latency below the best static policy run here, %"
              )] * with_gain
    head += [("vs step-|oracle %", "per-token latency over the per-step oracle run's - 1, %"
              " (myopic, ignores switch costs: a reference, not a bound)")] * with_oracle
    table: list[list[Cell]] = []
    for run in runs:
        s = run.summary
        cells: list[Cell] = [
            (f"{s.requests_finished}/{s.requests_total}", float(s.requests_finished)),
            _num(s.throughput_tok_s),
            (fmt_pair(s.ttft_s), s.ttft_s.mean),
            (fmt_pair(s.tpot_s, 1e3), s.tpot_s.mean),
            (fmt_pair(s.e2e_s), s.e2e_s.mean),
            _num(s.goodput_req_s),
            _num(s.slo_attainment, 100.0),
            (str(s.preemptions), float(s.preemptions)),
            _num(s.acceptance),
            _num(s.mean_gamma),
            _num(s.switches_per_min),
            _num(s.spec_time_share, 100.0),
            _num(s.peak_kv_usage, 100.0),
        ]
        if with_alt:
            for key, _, _ in ALT_COLUMNS:
                alt = (run.alternatives or {}).get(key)
                cells.append(_num(alt.pct) if alt else _NONE)
        y = run.yardsticks
        if with_bound:
            cells.append(_num(y.bound_pct) if y else _NONE)
        if with_gain:
            cells.append(_num(y.static_gain_pct) if y else _NONE)
        if with_oracle:
            cells.append(_num(run.regret.percent) if run.regret else _NONE)
        table.append(cells)
    best = [_best(BETTER.get(h), [row[j][1] for row in table])
            for j, (h, _) in enumerate(head[1:])]
    rows = []
    for run, cells in zip(runs, table, strict=True):
        swatch = f"<span class='sw' style='background:{colors[run.policy]}'></span>"
        name = html.escape(run.policy)
        tds = [f"<td class='name' data-v='{name}'>{swatch}{name}</td>"]
        for (text, value), top in zip(cells, best, strict=True):
            mark = " class='best'" if value == top else ""
            key = f" data-v='{float(value)!r}'" if math.isfinite(value) else ""
            tds.append(f"<td{mark}{key}>{html.escape(text)}</td>")
        rows.append("<tr>" + "".join(tds) + "</tr>")
    ths = "".join(
        # '|' marks where a head breaks onto its second line, keeping columns narrow.
        f"<th title='{html.escape(tip, quote=True)}'>{html.escape(h).replace('|', '<br>')}</th>"
        for h, tip in head
    )
    return (
        f"<table class='summary'><thead><tr>{ths}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>{SORT_SCRIPT}"
    )


_NONE: Cell = ("-", math.nan)


def _num(value: float, scale: float = 1.0) -> Cell:
    return fmt_num(value, scale), value * scale


def _best(better: str | None, values: list[float]) -> float:
    """The best finite value of a ranked column with at least two (NaN: none)."""
    finite = [v for v in values if math.isfinite(v)]
    if better is None or len(finite) < 2 or min(finite) == max(finite):
        return math.nan
    return min(finite) if better == "min" else max(finite)
