"""The agreement check's results table, from what scripts/agreement.sh wrote.

    .venv/bin/python experiments/agreement_table.py OUT [TAG] > OUT/table.md

With TAG, the validations are ``OUT/validate-TAG-<trace>/`` (the same benchmarks
validated another way: ``--time-base round`` or ``run``, or against ``OUT/profile-TAG.json``
where that exists).

Reads ``OUT/profile.json`` (its ``measured`` header: when, how long, the load, the CPU
binding), every ``OUT/bench-<trace>/`` (the live benchmark: load, noise floor) and
``OUT/validate-<trace>/`` (``pairs.csv``, ``errors.csv``, ``step_replay.csv`` from
``nightjar validate``), and prints markdown: per trace, the pairs the engine separated
and whether the simulator orders each the same way, the per-metric errors with their
95% intervals, the error per step kind, and the goal's three terms over all traces.
Pure reading and formatting: every number comes from those files.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd

METRICS = ("throughput_tok_s", "tpot_s_mean", "ttft_s_mean", "e2e_s_mean", "mean_batch_size")
NAMES = {"throughput_tok_s": "throughput", "tpot_s_mean": "mean TPOT",
         "ttft_s_mean": "mean TTFT", "e2e_s_mean": "mean E2E", "mean_batch_size": "mean batch"}


def _err(row: pd.Series) -> str:
    if not math.isfinite(row["error_pct"]):
        return "-"
    half = (row["error_hi"] - row["error_lo"]) / 2
    return f"{row['error_pct']:+.1f} ± {half:.1f}" if math.isfinite(half) else (
        f"{row['error_pct']:+.1f}")


def profile_lines(out: Path, tag: str) -> list[str]:
    path = out / f"profile-{tag}.json"
    if not tag or not path.is_file():  # the same profile, validated another way
        path = out / "profile.json"
    if not path.is_file():
        return ["(no profile.json)"]
    m = json.loads(path.read_text()).get("measured", {})
    load = m.get("load", {})
    bind = m.get("cpu_binding", {})
    return [f"Profile: measured {m.get('when', '?')} in {m.get('seconds', float('nan')) / 60:.1f} "
            f"min, {m.get('repeats')} repeats, foreign load {load.get('foreign_pct', '?')}% of "
            f"the engine's cores, binding {bind.get('bind', '?')}; cells re-measured: "
            f"{len(m.get('remeasured', []))}, inconsistent: "
            f"{len(m.get('inconsistent_cells', []))}."]


def trace_section(out: Path, bench: Path, tag: str) -> tuple[list[str], dict[str, int]]:
    name = bench.name.removeprefix("bench-")
    val = out / (f"validate-{tag}-{name}" if tag else f"validate-{name}")
    meta = json.loads((bench / "bench.json").read_text())
    runs = meta.get("runs", [])
    foreign = [r["load"].get("foreign_pct", math.nan) for r in runs if r.get("load")]
    lines = [f"### {meta.get('trace', name)} ({meta.get('requests')} requests, "
             f"{meta.get('repeats')} rounds, {meta.get('when', '?')})", "",
             f"Foreign load per run: mean {sum(foreign) / max(len(foreign), 1):.1f}%, max "
             f"{max(foreign, default=math.nan):.1f}% of the engine's cores; "
             f"{sum(r.get('attempts', 1) - 1 for r in runs)} runs repeated, "
             f"{sum(bool(r.get('loaded')) for r in runs)} kept loaded.", ""]
    counts = {"pairs": 0, "separated": 0, "miss": 0, "errors": 0, "within": 0}
    if not val.is_dir():
        return [*lines, "(not validated)", ""], counts
    pairs = pd.read_csv(val / "pairs.csv")
    errors = pd.read_csv(val / "errors.csv")
    noise = pd.read_csv(val / "noise.csv") if (val / "noise.csv").stat().st_size else None
    lines += ["| metric | noise floor (live) | pairs separated | simulator same order | misses |",
              "|---|---|---|---|---|"]
    for key in METRICS:
        ps = pairs[pairs["metric"] == key]
        sep = ps[ps["status"] != "unresolved"]
        miss = sep[sep["status"] == "MISS"]
        nf = "-"
        if noise is not None and len(noise):
            row = noise[noise["metric"] == key]
            if len(row):
                nf = f"{row['diff_pct'].iloc[0]:+.1f} ± {row['half_pct'].iloc[0]:.1f}%"
        missed = ", ".join(f"{a} vs {b}" for a, b in zip(miss["a"], miss["b"], strict=True))
        lines.append(f"| {NAMES[key]} | {nf} | {len(sep)} of {len(ps)} | "
                     f"{len(sep) - len(miss)} of {len(sep)} | {missed or '-'} |")
        if key == "e2e_s_mean":
            counts["pairs"], counts["separated"], counts["miss"] = len(ps), len(sep), len(miss)
    lines += ["", "Pairs by mean E2E (live paired difference, % of B; the simulator's):",
              ""]
    e2e = pairs[(pairs["metric"] == "e2e_s_mean")]
    for _, p in e2e.iterrows():
        lines.append(f"- {p['a']} vs {p['b']}: live {p['live_diff_pct']:+.1f} ± "
                     f"{p['live_half_pct']:.1f}%, sim {p['sim_diff_pct']:+.1f}%: {p['status']}")
    lines += ["", "Simulated vs live, error % (mean ± 95% over the rounds):", "",
              "| policy | " + " | ".join(NAMES[k] for k in METRICS) + " |",
              "|---|" + "---|" * len(METRICS)]
    for policy, g in errors.groupby("policy", sort=False):
        cells = {r["metric"]: _err(r) for _, r in g.iterrows()}
        lines.append(f"| {policy} | " + " | ".join(cells.get(k, "-") for k in METRICS) + " |")
        counts["errors"] += len(g)
        counts["within"] += int(g["within_10"].sum())
    replay = val / "step_replay.csv"
    if replay.is_file():
        r = pd.read_csv(replay)
        lines += ["", "Every live step priced by the simulator, error of the total per kind "
                  "(all rounds):", "", "| policy | decode | mixed | prefill-only |",
                  "|---|---|---|---|"]
        for policy, g in r.groupby("policy", sort=False):
            cells = {k: f"{e:+.1f}% ({n} steps)" for k, e, n in
                     zip(g["kind"], g["error_pct"], g["steps"], strict=True)}
            lines.append(f"| {policy} | {cells.get('decode', '-')} | {cells.get('mixed', '-')} | "
                         f"{cells.get('prefill', '-')} |")
    return [*lines, ""], counts


def main() -> int:
    out = Path(sys.argv[1])
    tag = sys.argv[2] if len(sys.argv) > 2 else ""
    title = "# Agreement check: simulator vs the CPU engine" + (f" ({tag})" if tag else "")
    lines = [title, "", *profile_lines(out, tag), ""]
    total = {"pairs": 0, "separated": 0, "miss": 0, "errors": 0, "within": 0}
    for bench in sorted(out.glob("bench-*")):
        if (bench / "bench.json").is_file():
            section, counts = trace_section(out, bench, tag)
            lines += section
            for k, v in counts.items():
                total[k] += v
    lines += ["## Goal", "",
              f"- pairs the engine separated (mean E2E, over every trace): {total['separated']} "
              f"of {total['pairs']} (goal: >= 4 of the 10 on each trace);",
              f"- separated pairs the simulator orders otherwise: {total['miss']} (goal: 0);",
              f"- policy x metric errors within 10%: {total['within']} of {total['errors']} "
              "(goal: all)."]
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
