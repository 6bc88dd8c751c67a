"""The live benchmark's folder: raw per-round rows next to their summary, and reading it back.

```
OUT/bench.json          the setup (command, binding, cores, trace, plan), every run's load
OUT/runs.csv            one row per run: round, position, label, load, attempts, metrics
OUT/policies.csv        per label and metric: mean and 95% interval over the rounds
OUT/pairs.csv           per pair and metric: the paired difference, its interval, verdict
OUT/round-R/<label>/    each run's requests.csv, steps.csv, summary.json (a run folder)
```

The noise floor is the pair (``SPEC``, ``SPEC#2``): the same policy twice per round.
Pure Python over :class:`nightjar.core.records.RunResult` (no engine types).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightjar.core.records import RunResult
from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError
from nightjar.results.metrics import summarize
from nightjar.results.paired import METRICS, PairedDiff, Values, all_pairs, per_label

NOISE_SUFFIX = "#2"
BENCH_FILE = "bench.json"
# The run metrics runs.csv keeps (besides the judged ones, METRICS).
EXTRA_METRICS = ("ttft_s_p99", "tpot_s_p99", "e2e_s_p99", "acceptance", "mean_gamma",
                 "spec_time_share", "preemptions", "duration_s")
LOAD_KEYS = ("foreign_pct", "foreign_peak_pct", "own_pct", "elsewhere_pct", "load_avg_1m")


@dataclass
class RoundRun:
    """One run of the benchmark, as recorded."""

    round: int
    position: int
    label: str  # policy spec, or SPEC#2 (the noise floor's twin)
    result: RunResult
    load: dict[str, Any] = field(default_factory=dict)  # LoadRecord.to_json()
    attempts: int = 1
    loaded: bool = False  # above the load threshold on every attempt
    wall_s: float = 0.0
    earlier_loads: list[float] = field(default_factory=list)
    slug: str = ""  # its folder under round-R/
    # When it began, in seconds after the benchmark's engines were up (all traces' runs
    # share this clock, so it also says how another trace's runs interleaved with these).
    started_s: float = 0.0

    @property
    def policy(self) -> str:
        return self.label.removesuffix(NOISE_SUFFIX)

    def metrics(self, slo: Slo | None = None) -> dict[str, float]:
        s = summarize(self.result, slo).as_dict()
        keys = [k for k, _, _ in METRICS] + list(EXTRA_METRICS)
        return {k: float(s[k]) for k in keys}


def labels_of(runs: Sequence[RoundRun]) -> list[str]:
    """Labels in the order of the first round (the plan's order before rotation)."""
    seen: list[str] = []
    for run in sorted(runs, key=lambda r: (r.round, r.position)):
        if run.label not in seen:
            seen.append(run.label)
    return seen


def values_of(runs: Sequence[RoundRun], clean_only: bool, slo: Slo | None = None) -> Values:
    """label -> round -> metric -> value; ``clean_only`` drops every round that holds a
    ``loaded`` run (a pair needs both of its runs from a quiet round)."""
    dirty = {r.round for r in runs if r.loaded} if clean_only else set()
    out: dict[str, dict[int, dict[str, float]]] = {}
    for run in runs:
        if run.round not in dirty:
            out.setdefault(run.label, {})[run.round] = run.metrics(slo)
    return out


def noise_pair(labels: Sequence[str]) -> tuple[str, str] | None:
    twin = next((x for x in labels if x.endswith(NOISE_SUFFIX)), None)
    return (twin.removesuffix(NOISE_SUFFIX), twin) if twin is not None else None


def bench_pairs(runs: Sequence[RoundRun], slo: Slo | None = None) -> tuple[list[PairedDiff], bool]:
    """Every pair's paired differences over the clean rounds (all rounds where fewer
    than two are clean: the second value says so)."""
    values = values_of(runs, clean_only=True, slo=slo)
    clean = len({r for v in values.values() for r in v})
    if clean < 2:
        values = values_of(runs, clean_only=False, slo=slo)
    labels = labels_of(runs)
    noise = noise_pair(labels)
    # The twin is compared with its original only: it is the same policy.
    pairs = [p for p in all_pairs(values, labels)
             if not (p.a.endswith(NOISE_SUFFIX) or p.b.endswith(NOISE_SUFFIX))
             or (noise is not None and {p.a, p.b} == set(noise))]
    return pairs, clean >= 2


def write_tables(out: Path, runs: Sequence[RoundRun], slo: Slo | None = None) -> None:
    """``runs.csv``, ``policies.csv`` and ``pairs.csv`` in ``out``."""
    rows = []
    for run in sorted(runs, key=lambda r: (r.round, r.position)):
        row: dict[str, Any] = {"round": run.round, "position": run.position,
                               "label": run.label, "policy": run.policy,
                               "attempts": run.attempts, "loaded": int(run.loaded),
                               "wall_s": round(run.wall_s, 2)}
        row.update({k: run.load.get(k, math.nan) for k in LOAD_KEYS})
        row.update(run.metrics(slo))
        rows.append(row)
    _csv(out / "runs.csv", rows)
    values = values_of(runs, clean_only=False, slo=slo)
    per = []
    for label in labels_of(runs):
        for key, name, _ in METRICS:
            iv = per_label(values, label, key)
            per.append({"label": label, "metric": key, "name": name, "runs": iv.n,
                        "mean": iv.mean, "lo": iv.lo, "hi": iv.hi,
                        "half_width_pct": 100.0 * iv.half_width / iv.mean if iv.mean else math.nan})
    _csv(out / "policies.csv", per)
    pairs, _clean = bench_pairs(runs, slo)
    noise = noise_pair(labels_of(runs))
    _csv(out / "pairs.csv", [pair_row(p, noise, runs) for p in pairs])


def pair_row(p: PairedDiff, noise: tuple[str, str] | None,
             runs: Sequence[RoundRun] = ()) -> dict[str, Any]:
    # The worst foreign load among the two policies' runs: the figure's own load.
    loads = [r.load.get("foreign_pct", math.nan) for r in runs if r.label in (p.a, p.b)]
    return {"a": p.a, "b": p.b, "metric": p.metric, "rounds": p.diff.n,
            "diff": p.diff.mean, "lo": p.diff.lo, "hi": p.diff.hi,
            "rel_pct": p.rel_pct, "rel_half_pct": p.rel_half_pct,
            "separated": int(p.separated), "verdict": p.verdict(),
            "noise_floor": int(noise is not None and {p.a, p.b} == set(noise)),
            "max_foreign_pct": max(loads, default=math.nan)}


def _csv(path: Path, rows: list[dict[str, Any]]) -> None:
    if not rows:
        path.write_text("")
        return
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_meta(out: Path, meta: dict[str, Any], runs: Sequence[RoundRun]) -> None:
    data = dict(meta)
    data["runs"] = [{"round": r.round, "position": r.position, "label": r.label,
                     "slug": r.slug, "attempts": r.attempts, "loaded": r.loaded,
                     "wall_s": round(r.wall_s, 2), "started_s": round(r.started_s, 2),
                     "earlier_foreign_pct": [round(x, 2) for x in r.earlier_loads],
                     "load": r.load} for r in runs]
    (out / BENCH_FILE).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


@dataclass
class BenchRecord:
    folder: Path
    meta: dict[str, Any]
    runs: list[RoundRun]


def is_bench(folder: Path) -> bool:
    return (Path(folder) / BENCH_FILE).is_file()


def read_bench(folder: Path) -> BenchRecord:
    """A benchmark folder back: every run with its round, label and load. Every field is
    checked (one-line errors): a slug names a folder inside its round, never a path."""
    from nightjar.checks import boolean, integer, number, text
    from nightjar.reading import as_path, read_json
    from nightjar.results.read import read_run_folder

    folder = as_path(folder, "--live-run")
    what = f"{folder / BENCH_FILE}"
    meta = read_json(folder / BENCH_FILE, what)
    if not isinstance(meta, dict) or not isinstance(meta.get("runs"), list):
        raise NightjarInputError(f"{folder}: not a benchmark folder ({what}: no list of runs)")
    runs = []
    for i, e in enumerate(meta["runs"]):
        at = f"{what}: runs[{i}]"
        if not isinstance(e, dict):
            raise NightjarInputError(f"{at} must be an object")
        slug = text(e.get("slug", ""), f"{at}.slug", empty=True)
        if slug in (".", "..") or "/" in slug or "\\" in slug or "\0" in slug:
            raise NightjarInputError(f"{at}.slug must name a folder, got {slug!r}")
        rnd = integer(e.get("round"), f"{at}.round", lo=0)
        load = e.get("load", {})
        earlier = e.get("earlier_foreign_pct", [])
        if not isinstance(load, dict) or not isinstance(earlier, list):
            raise NightjarInputError(f"{at}: load must be an object, earlier_foreign_pct a list")
        result, _slo = read_run_folder(folder / f"round-{rnd}" / slug)
        runs.append(RoundRun(rnd, integer(e.get("position"), f"{at}.position", lo=0),
                             text(e.get("label"), f"{at}.label"), result, dict(load),
                             integer(e.get("attempts", 1), f"{at}.attempts", lo=1),
                             boolean(e.get("loaded", False), f"{at}.loaded"),
                             number(e.get("wall_s", 0.0), f"{at}.wall_s", nonnegative=True),
                             [number(x, f"{at}.earlier_foreign_pct") for x in earlier],
                             slug, number(e.get("started_s", 0.0), f"{at}.started_s",
                                          nonnegative=True)))
    return BenchRecord(folder, meta, runs)
