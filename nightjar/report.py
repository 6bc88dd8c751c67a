"""A self-contained HTML report of one or more runs (plotly.js inlined once, no CDN).

Sections: a summary table; per-run charts, one column per policy (load, batch size,
gamma, KV usage with the draft's residency shaded, latency ECDFs); a comparison
(throughput, E2E, goodput, regret bars; regret curves when an oracle run is given).

See nightjar/report_charts.py for how long runs are drawn.
"""

from __future__ import annotations

import html
from pathlib import Path

from plotly.offline import get_plotlyjs

from nightjar.errors import NightjarInputError
from nightjar.metrics import Slo, Summary, summarize
from nightjar.records import RunResult
from nightjar.regret import Regret, regret
from nightjar.report_charts import MAX_POINTS, comparison_figures, run_figure
from nightjar.table import fmt_num, fmt_pair


def _summary_html(summaries: list[Summary], regrets: dict[str, Regret] | None) -> str:
    head = [
        "policy",
        "engine",
        "done",
        "tok/s",
        "TTFT s mean/p99",
        "TPOT ms mean/p99",
        "E2E s mean/p99",
        "goodput req/s",
        "SLO %",
        "preempt",
        "accept",
        "mean gamma",
        "sw/min",
        "toggles/min",
        "spec %",
        "peak KV %",
    ]
    if regrets is not None:
        head.append("regret %")
    rows = []
    for s in summaries:
        cells = [
            s.policy,
            s.engine,
            f"{s.requests_finished}/{s.requests_total}",
            fmt_num(s.throughput_tok_s),
            fmt_pair(s.ttft_s),
            fmt_pair(s.tpot_s, 1e3),
            fmt_pair(s.e2e_s),
            fmt_num(s.goodput_req_s),
            fmt_num(s.slo_attainment, 100.0),
            str(s.preemptions),
            fmt_num(s.acceptance),
            fmt_num(s.mean_gamma),
            fmt_num(s.switches_per_min),
            fmt_num(s.toggles_per_min),
            fmt_num(s.spec_time_share, 100.0),
            fmt_num(s.peak_kv_usage, 100.0),
        ]
        if regrets is not None:
            cells.append(fmt_num(regrets[s.policy].percent))
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    ths = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    return f"<table><thead><tr>{ths}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
    "table{border-collapse:collapse;font-size:13px}td,th{padding:4px 8px;"
    "border-bottom:1px solid #ddd;text-align:right}td:first-child,th:first-child"
    "{text-align:left}.wide{overflow-x:auto}.note{color:#666;font-size:13px}"
)


_RUNS_NOTE = (
    f"Runs longer than {MAX_POINTS} steps are drawn as {MAX_POINTS} equal-count step "
    "buckets (bucket means; a fractional gamma means the bucket mixed lengths). "
    "Shaded KV area: the draft model is resident."
)
_REGRET_NOTE = (
    "<p class='note'>Regret % = per-token latency / the oracle's - 1, where per-token latency = "
    "sum(step time x batch size) / emitted tokens.</p>"
)


def write_report(
    results: list[RunResult],
    path: Path,
    title: str,
    oracle: RunResult | None = None,
    *,
    slo: Slo | None = None,
    summaries: list[Summary] | None = None,
    regrets: dict[str, Regret] | None = None,
) -> Path:
    """Write the report to ``path`` (parent folders are created) and return it.

    ``summaries`` (one per run) and ``regrets`` (by policy) are computed if not given.
    """
    if not results:
        raise NightjarInputError("report needs at least one run")
    if summaries is None:
        summaries = [summarize(r, slo) for r in results]
    if regrets is None and oracle is not None:
        regrets = {r.policy: regret(r, oracle) for r in results}
    meta = sorted(
        {f"trace {r.trace} · {r.engine} · profile {r.profile} · seed {r.seed}" for r in results}
    ) + sorted({s.slo.describe() for s in summaries})
    div = "".join  # figures share the one inlined plotly.js from <head>
    runs = run_figure(results).to_html(full_html=False, include_plotlyjs=False)
    comp = div(
        f.to_html(full_html=False, include_plotlyjs=False)
        for f in comparison_figures(summaries, regrets, results, oracle)
    )
    page = (
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title><style>{_CSS}</style><script type='text/javascript'>{get_plotlyjs()}"
        f"</script></head><body><h1>{html.escape(title)}</h1>"
        + "".join(f"<p>{html.escape(m)}</p>" for m in meta)
        + f"<h2>Summary</h2>{_summary_html(summaries, regrets)}"
        f"<h2>Runs</h2><p class='note'>{_RUNS_NOTE}</p><div class='wide'>{runs}</div>"
        f"<h2>Comparison</h2>{_REGRET_NOTE if oracle is not None else ''}"
        f"<div class='wide'>{comp}</div></body></html>"
    )
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page, encoding="utf-8")
    except OSError as exc:
        raise NightjarInputError(f"cannot write to {path}: {exc.strerror or exc}") from None
    return path
