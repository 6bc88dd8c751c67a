"""Regenerate ``reports/paper/``: the Nightjar paper's claims, like for like, at several seeds.

    nice -n 10 python experiments/paper.py --out reports/paper [--seeds 5] [--jobs 2]

Writes ``rows.csv`` (one row per section, trace, profile, seed and run),
``intervals.csv`` (mean and 95% t interval over seeds), ``correction.csv``,
``run.json`` (when and how long), ``tables.md`` (every table, each with the
``nightjar sim`` commands that re-run it), the generated blocks of ``README.md``
(every number and comparison the README states; its prose is hand-written method
and caveats) and ``index.html`` (README and tables, self-contained). The traces it
makes are written to ``reports/paper/traces/``. Deterministic per seed: contention
changes only the wall time. Not part of CI (about 20 minutes on 2 quiet cores); each
finished group is cached in ``<out>/.cache/`` (keyed on a fingerprint of the code and
data), so an interrupted run resumes. ``--render-only`` rewrites tables.md, the
README's blocks and index.html from the committed CSVs.

What runs where: ``experiments/paper_cells.py``; what is written and how verdicts are
made: ``experiments/paper_text.py``.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

import paper_cells as pc  # the sibling scripts in this folder
import paper_text as pt

Row = dict[str, float | str]
CORRECTION_STEPS = (100, 1000, 3000)
INT_COLUMNS = ("seed", "batch_size", "preemptions", "gamma_switches", "gamma_toggles",
               "offloads", "rejected_requests", "capped_requests", "requests")


def correction_rows(seeds: int) -> list[Row]:
    """How long a wrong table misleads ``nightjar+``: the excess per-token cost of its
    decisions over the best gamma's, in windows of the run.

    Fixed batch size, per-request acceptance 0.6, the knee latency model of the
    policy tests (the synthetic loop: no queueing, outcomes one step late). Excess =
    ``T(B, g) / tau(g)`` of the chosen gamma over the minimum over gammas, minus 1.
    """
    from nightjar.core.estimators import expected_tokens
    from nightjar.core.policy import PolicyEnv
    from nightjar.core.types import LatencyModel
    from nightjar.policies.harness import KneeLatency, run_loop
    from nightjar.policies.nightjar_plus import NightjarPlusPolicy
    from nightjar.profile.priors import ScaledLatency, SpecScaledLatency

    lat = KneeLatency()
    rows: list[Row] = []
    priors: dict[str, LatencyModel | None] = {
        "exact": lat,
        "scale:0.7": ScaledLatency(lat, 0.7),
        "spec-scale:0.7": SpecScaledLatency(lat, 0.7),
        "spec-scale:1.3": SpecScaledLatency(lat, 1.3),
        "none": None,
    }
    for b in (4, 32, 96):
        cost = [lat.step_time_s(b, g, 512.0) / expected_tokens(0.6, g)
                for g in range(pc.GAMMA_MAX + 1)]
        for seed in range(seeds):
            for name, prior in priors.items():
                env = PolicyEnv(gamma_max=pc.GAMMA_MAX, seed=seed, latency=prior)
                trace = run_loop(
                    NightjarPlusPolicy(env), lat, lambda i, b=b: b, lambda i, n: [0.6] * n,
                    CORRECTION_STEPS[-1], gamma_max=pc.GAMMA_MAX, seed=seed,
                )
                excess = np.asarray([cost[g] / min(cost) - 1.0 for g in trace.gamma]) * 100.0
                row: Row = {"batch_size": b, "seed": seed, "prior": name}
                lo = 0
                for hi in CORRECTION_STEPS:
                    row[f"excess_{lo}_{hi}"] = float(excess[lo:hi].mean())
                    lo = hi
                rows.append(row)
    return rows


def write_csv(path: Path, rows: Sequence[Row]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def read_csv(path: Path) -> list[Row]:
    out: list[Row] = []
    with path.open() as f:
        for row in csv.DictReader(f):
            parsed: Row = {}
            for k, v in row.items():
                try:
                    parsed[k] = float(v)
                except ValueError:
                    parsed[k] = v
            for k in INT_COLUMNS:
                if k in parsed:
                    parsed[k] = int(float(parsed[k]))
            out.append(parsed)
    return out


def _code_fingerprint() -> str:
    """What a cached group's numbers depend on besides the group: the simulator, the
    policies, the profiles and traces, and the cell definitions. A change to any of
    them invalidates the cache (a stale cache once published old numbers as new)."""
    h = hashlib.sha1()
    for pattern in ("nightjar/**/*.py", "nightjar/profile/bundled/*.json",
                    "nightjar/trace/bundled/*.json", "experiments/paper_cells.py",
                    "reports/paper/traces/*.json"):
        for f in sorted(pc.ROOT.glob(pattern)):
            h.update(f.relative_to(pc.ROOT).as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()


def _cache_name(g: pc.Group, fingerprint: str) -> str:
    key = f"{fingerprint}|{g.section}|{g.trace}|{g.profile}|{g.seed}|{g.runs}"
    return hashlib.sha1(key.encode()).hexdigest()[:16] + ".json"


def render(out: Path, rows: Sequence[Row], corr: Sequence[Row], meta: dict[str, Any]) -> None:
    """tables.md, the README's generated blocks, and index.html (README + tables)."""
    seeds = len({r["seed"] for r in rows})
    md = pt.tables_md(rows, corr, seeds)
    (out / "tables.md").write_text(md)
    readme = out / "README.md"
    text = pt.render_readme(readme.read_text(), rows, corr, meta) if readme.exists() else ""
    if text:
        readme.write_text(text)
    runs = list(dict.fromkeys(str(r["run"]) for r in rows))
    (out / "index.html").write_text(pt.md_to_html(text + "\n" + md, runs))


def run_all(out: Path, seeds: int, jobs: int, only: str | None) -> tuple[list[Row], int, int]:
    """(rows, groups computed, groups cached)."""
    todo = [g for g in pc.groups(seeds) if only in (None, g.section)]
    started = time.perf_counter()
    cache = out / ".cache"
    cache.mkdir(exist_ok=True)
    fingerprint = _code_fingerprint()
    rows: list[Row] = []
    pending = []
    for g in todo:
        hit = cache / _cache_name(g, fingerprint)
        if hit.exists():
            rows += json.loads(hit.read_text())
        else:
            pending.append(g)
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for k, (g, part) in enumerate(zip(pending, pool.map(pc.run_group, pending),
                                          strict=True), 1):
            (cache / _cache_name(g, fingerprint)).write_text(json.dumps(part))
            rows += part
            if k % 20 == 0 or k == len(pending):
                print(f"{k}/{len(pending)} groups, {time.perf_counter() - started:.0f} s",
                      flush=True)
    order = {s: i for i, s in enumerate(pc.SECTIONS)}
    rows.sort(key=lambda r: (order[str(r["section"])], str(r["profile"]), str(r["trace"]),
                             int(r["seed"])))
    return rows, len(pending), len(todo) - len(pending)


def intervals(rows: Sequence[Row]) -> list[Row]:
    flat: list[Row] = []
    for (section, trace, profile), sub in pt.by_key(rows).items():
        for run in dict.fromkeys(str(r["run"]) for r in sub):
            for metric in ("throughput_tok_s", "e2e_s_mean", "ttft_s_mean", "regret_bound_pct",
                           "gain_static_pct", "step_oracle_pct", "gamma_switches",
                           "gamma_toggles"):
                iv = pt.interval(sub, run, metric)
                flat.append({"section": section, "trace": trace, "profile": profile,
                             "run": run, "metric": metric, "mean": iv.mean, "lo": iv.lo,
                             "hi": iv.hi, "n": iv.n})
    return flat


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("reports/paper"))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--only", default=None, choices=[*pc.SECTIONS, "correction"],
                    help="run only this section and print its tables (for a quick look)")
    ap.add_argument("--render-only", action="store_true",
                    help="rewrite tables.md, the README's blocks and index.html from the CSVs")
    args = ap.parse_args(argv)
    if args.render_only:
        meta_path = args.out / "run.json"
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        render(args.out, read_csv(args.out / "rows.csv"), read_csv(args.out / "correction.csv"),
               meta)
        return 0
    if args.seeds < 2:
        print("--seeds must be >= 2 (intervals need two runs)", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    pc.write_traces()
    if args.only == "correction":
        print("\n".join(pt.correction_table(correction_rows(args.seeds))))
        return 0
    started = time.time()
    rows, computed, cached = run_all(args.out, args.seeds, args.jobs, args.only)
    if args.only is not None:  # a quick look: print, write nothing over the report
        print(pt.tables_md(rows, correction_rows(args.seeds), args.seeds))
        return 0
    corr = correction_rows(args.seeds)
    write_csv(args.out / "rows.csv", rows)
    write_csv(args.out / "correction.csv", corr)
    write_csv(args.out / "intervals.csv", intervals(rows))
    finished = time.time()
    meta = {"started": time.strftime("%Y-%m-%d %H:%M", time.gmtime(started)),
            "finished": time.strftime("%H:%M", time.gmtime(finished)),
            "minutes": round((finished - started) / 60.0, 1), "jobs": args.jobs,
            "computed": computed, "cached": cached}
    (args.out / "run.json").write_text(json.dumps(meta, indent=1) + "\n")
    render(args.out, rows, corr, meta)
    print(f"wrote {args.out}/ in {finished - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
