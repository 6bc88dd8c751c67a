"""The report's summary table: the terminal table's columns plus a few more."""

from __future__ import annotations

import html

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


def summary_html(runs: list[PolicyRun], colors: dict[str, str]) -> str:
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
    rows = []
    for run in runs:
        s = run.summary
        cells = [
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
            fmt_num(s.spec_time_share, 100.0),
            fmt_num(s.peak_kv_usage, 100.0),
        ]
        if with_alt:
            for key, _, _ in ALT_COLUMNS:
                alt = (run.alternatives or {}).get(key)
                cells.append(fmt_num(alt.pct) if alt else "-")
        y = run.yardsticks
        if with_bound:
            cells.append(fmt_num(y.bound_pct) if y else "-")
        if with_gain:
            cells.append(fmt_num(y.static_gain_pct) if y else "-")
        if with_oracle:
            cells.append(fmt_num(run.regret.percent) if run.regret else "-")
        swatch = f"<span class='sw' style='background:{colors[run.policy]}'></span>"
        name = f"<td class='name'>{swatch}{html.escape(run.policy)}</td>"
        rows.append(
            "<tr>" + name + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
        )
    ths = "".join(
        # '|' marks where a head breaks onto its second line, keeping columns narrow.
        f"<th title='{html.escape(tip, quote=True)}'>{html.escape(h).replace('|', '<br>')}</th>"
        for h, tip in head
    )
    return (
        f"<table class='summary'><thead><tr>{ths}</tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
