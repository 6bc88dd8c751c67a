"""The live benchmark's terminal tables: per-policy intervals, paired verdicts, noise, load."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich import box
from rich.table import Table

from nightjar.core.slo import Slo
from nightjar.report.terminal import fmt_num
from nightjar.results.bench import RoundRun, bench_pairs, labels_of, noise_pair, values_of
from nightjar.results.paired import METRICS, per_label
from nightjar.results.stats import mean_interval

# Display scale per metric (TPOT in ms).
SCALE = {"tpot_s_mean": 1e3}
UNIT = {"throughput_tok_s": "tok/s", "tpot_s_mean": "ms", "ttft_s_mean": "s",
        "e2e_s_mean": "s", "mean_batch_size": ""}


def _iv(mean: float, half: float, scale: float) -> str:
    if not math.isfinite(mean):
        return "-"
    if not math.isfinite(half):
        return fmt_num(mean, scale)
    return f"{fmt_num(mean, scale)} ± {fmt_num(half, scale)}"


def policy_table(runs: Sequence[RoundRun], slo: Slo | None = None) -> Table:
    values = values_of(runs, clean_only=False, slo=slo)
    table = Table(title="per policy: mean ± 95% half-width over the rounds", box=box.SIMPLE)
    table.add_column("policy")
    for key, name, _ in METRICS:
        table.add_column(f"{name} ({UNIT[key]})" if UNIT[key] else name, justify="right")
    table.add_column("foreign load %", justify="right")
    for label in labels_of(runs):
        cells = []
        for key, _, _ in METRICS:
            iv = per_label(values, label, key)
            cells.append(_iv(iv.mean, iv.half_width, SCALE.get(key, 1.0)))
        load = mean_interval([r.load.get("foreign_pct", math.nan) for r in runs
                              if r.label == label])
        cells.append(_iv(load.mean, load.half_width, 1.0))
        table.add_row(label, *cells)
    return table


def pair_table(runs: Sequence[RoundRun], slo: Slo | None = None) -> Table:
    pairs, clean = bench_pairs(runs, slo)
    noise = noise_pair(labels_of(runs))
    title = ("paired per-round differences (A - B, % of B, 95% interval): "
             + ("over the rounds without a loaded run" if clean else
                "OVER ALL ROUNDS (fewer than two were quiet)"))
    table = Table(title=title, box=box.SIMPLE)
    table.add_column("A vs B")
    keys = [k for k, _, _ in METRICS]
    for _key, name, _ in METRICS:
        table.add_column(name, justify="right")
    by_pair: dict[tuple[str, str], dict[str, str]] = {}
    for p in pairs:
        cell = (f"{p.rel_pct:+.1f} ± {p.rel_half_pct:.1f}%" if math.isfinite(p.rel_pct)
                else "-")
        by_pair.setdefault((p.a, p.b), {})[p.metric] = (
            f"[bold]{cell}[/]" if p.separated else f"[dim]{cell}[/]")
    for (a, b), cells in by_pair.items():
        name = f"{a} vs {b}" + (" (noise floor)" if noise and {a, b} == set(noise) else "")
        table.add_row(name, *(cells.get(k, "-") for k in keys))
    return table


def verdict_lines(runs: Sequence[RoundRun], slo: Slo | None = None) -> list[str]:
    """"A beats B" lines (separated pairs only), the noise floor and the load."""
    pairs, _clean = bench_pairs(runs, slo)
    noise = noise_pair(labels_of(runs))
    lines = []
    for key, name, _ in METRICS:
        real = [p for p in pairs if p.metric == key
                and not (noise and {p.a, p.b} == set(noise))]
        sep = [p for p in real if p.separated]
        said = "; ".join(f"{p.verdict()} ({p.rel_pct:+.1f}%)" for p in sep) or "none"
        lines.append(f"{name}: {len(sep)} of {len(real)} pairs separated: {said}")
        if noise:
            twin = next(p for p in pairs if p.metric == key and {p.a, p.b} == set(noise))
            lines.append(f"  noise floor ({noise[0]} twice a round): {twin.rel_pct:+.1f} ± "
                         f"{twin.rel_half_pct:.1f}%" + (" SEPARATED: the machine moved "
                                                         "within rounds" if twin.separated
                                                         else ""))
    loaded = [r for r in runs if r.loaded]
    foreign = mean_interval([r.load.get("foreign_pct", math.nan) for r in runs])
    retried = sum(r.attempts - 1 for r in runs)
    lines.append(f"foreign load: {foreign.mean:.1f}% of the engine's cores on average "
                 f"(max {max((r.load.get('foreign_pct', 0.0) for r in runs), default=0):.1f}%); "
                 f"{retried} runs repeated, {len(loaded)} kept loaded")
    return lines


def bench_tables(runs: Sequence[RoundRun], slo: Slo | None = None) -> list[Table | str]:
    return [policy_table(runs, slo), pair_table(runs, slo), *verdict_lines(runs, slo)]
