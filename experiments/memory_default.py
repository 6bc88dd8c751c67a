"""The default Nightjar against what a user could deploy instead, where memory matters.

    python experiments/memory_default.py --out reports/memory [--seeds 5] [--jobs 2]

Every bundled profile whose draft holds at least 2% of the KV pool, every bundled
dynamic trace, ``--seeds`` seeds (seed i re-draws the trace's arrivals, as
``nightjar sim --seeds`` does, and the acceptance rates), default settings (V1
engine, ``--draft-kv skip``, gamma_max 4, ``--offload auto``). Per seed: ``nospec``
(no draft loaded), ``fixed:1..4`` and ``nightjar+`` under the default, and
``nightjar+@offload=off`` (elastic memory off). The verdict per cell: ``nightjar+``
against each of them on mean E2E and throughput, paired per seed with a 95% interval;
"behind" only where the interval excludes zero on the wrong side.

Writes ``rows.csv`` (one row per profile, trace, seed and run) and ``README.md``;
``--render-only`` rebuilds README.md from the CSVs. Out of 360 comparisons about nine
separate by chance at 95% even where nothing differs, so ``--recheck N`` reruns every
separated one on N fresh seeds (numbered after the table's) into ``recheck.csv``: a
difference that is real separates again, one drawn by chance mostly does not.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

PROFILES = (
    "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b",
    "rtx4090-paper/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b",
    "l40s/llama-3.1-8b+llama-3.2-1b",
    "h100-80gb/llama-3.1-8b+llama-3.2-1b",
    "h100-80gb-tp2/deepseek-r1-distill-qwen-32b+qwen2.5-0.5b",
)
TRACES = ("burst", "oscillation", "migration", "alpaca-burst", "alpaca-oscillation",
          "alpaca-migration")
SUBJECT = "nightjar+"
OTHERS = ("nospec", "fixed:1", "fixed:2", "fixed:3", "fixed:4", "nightjar+@offload=off")
FIELDS = ("profile", "trace", "seed", "policy", "throughput_tok_s", "e2e_s_mean",
          "ttft_s_mean", "tpot_s_mean", "preemptions", "offloads", "capacity_offloads")


METRICS = (("e2e_s_mean", "mean E2E", False), ("throughput_tok_s", "throughput", True))


def run_group(job: tuple[str, str, int, tuple[str, ...]]) -> list[dict[str, object]]:
    import nightjar
    from nightjar.results.metrics import summarize
    from nightjar.trace.trace import load_trace

    profile, name, seed, policies = job
    base = load_trace(name)
    trace = load_trace(name, seed=base.seed + seed)
    results = nightjar.simulate(trace, profile, list(policies), seed=seed, oracle=False)
    rows = []
    for r in results:
        s = summarize(r)
        rows.append({
            "profile": profile, "trace": name, "seed": seed, "policy": r.policy,
            "throughput_tok_s": s.throughput_tok_s, "e2e_s_mean": s.e2e_s.mean,
            "ttft_s_mean": s.ttft_s.mean, "tpot_s_mean": s.tpot_s.mean,
            "preemptions": s.preemptions, "offloads": r.extra.get("offloads", 0.0),
            "capacity_offloads": r.extra.get("capacity_offloads", 0.0),
        })
    return rows


Runs = dict[str, dict[int, dict[str, str]]]


def by_cell(rows: Sequence[dict[str, str]]) -> dict[tuple[str, str], Runs]:
    cells: dict[tuple[str, str], Runs] = {}
    for r in rows:
        cells.setdefault((r["profile"], r["trace"]), {}).setdefault(r["policy"], {})[
            int(r["seed"])] = r
    return cells


def paired(runs: Runs, other: str, metric: str, up: bool) -> tuple[str, bool] | None:
    """``nightjar+`` minus ``other`` on ``metric`` over their common seeds, in % of the
    other's mean, and whether ``nightjar+`` is behind with a separated interval."""
    from nightjar.results.stats import mean_interval

    mine, theirs = runs.get(SUBJECT, {}), runs.get(other, {})
    common = sorted(set(mine) & set(theirs))
    diffs = [float(mine[s][metric]) - float(theirs[s][metric]) for s in common]
    base = sum(float(theirs[s][metric]) for s in common) / max(len(common), 1)
    iv = mean_interval(diffs)
    if not common or not math.isfinite(iv.mean) or base == 0:
        return None
    worse = iv.n > 1 and ((iv.lo > 0) if not up else (iv.hi < 0))
    text = f"{100 * iv.mean / base:+.1f} ± {100 * iv.half_width / abs(base):.1f}"
    return (f"**{text}**" if worse else text), worse


def separated(rows: Sequence[dict[str, str]]) -> list[tuple[str, str, str]]:
    """(profile, trace, other) of every comparison ``nightjar+`` is behind in."""
    found: list[tuple[str, str, str]] = []
    for (profile, trace), runs in by_cell(rows).items():
        for other in OTHERS:
            if any((p := paired(runs, other, metric, up)) is not None and p[1]
                   for metric, _, up in METRICS) and (profile, trace, other) not in found:
                found.append((profile, trace, other))
    return found


def render(rows: Sequence[dict[str, str]], seeds: int, command: str,
           recheck: Sequence[dict[str, str]] = ()) -> str:
    from nightjar.results.stats import mean_interval

    cells = by_cell(rows)
    out = [
        "# The default Nightjar where the draft's memory matters",
        "",
        "Generated by `experiments/memory_default.py`; the command:",
        "",
        f"    {command}",
        "",
        f"Default settings (V1, `--draft-kv skip`, gamma_max 4, `--offload auto`), {seeds}"
        " seeds (each re-draws the trace's arrivals and the acceptance rates), every bundled"
        " profile whose draft holds at least 2% of the KV pool, every bundled dynamic trace."
        " Each entry is `nightjar+` minus the named run, paired per seed, mean ± 95% half-width"
        " in % of the named run's mean; **bold** where the interval excludes zero with"
        " `nightjar+` behind (longer E2E, lower throughput). `off` is `nightjar+@offload=off`"
        " (elastic memory off); `nospec` serves with no draft loaded.",
        "",
    ]
    behind = total = 0
    for metric, label, up in METRICS:
        out += [f"## {label}", "", "| profile | trace | nightjar+ | " +
                " | ".join(OTHERS) + " |", "|---" * (3 + len(OTHERS)) + "|"]
        for (profile, trace), runs in cells.items():
            mine = runs.get(SUBJECT, {})
            own = mean_interval([float(mine[s][metric]) for s in sorted(mine)])
            unit = "{:.1f}" if metric == "e2e_s_mean" else "{:.0f}"
            line = [profile, trace, own.format(unit)]
            for other in OTHERS:
                p = paired(runs, other, metric, up)
                line.append("-" if p is None else p[0])
                if p is not None:
                    total += 1
                    behind += p[1]
            out.append("| " + " | ".join(line) + " |")
        out.append("")
    verdict = (f"`nightjar+` is behind with a separated interval in {behind} of {total}"
               " comparisons.")
    at = out.index("## mean E2E")
    return "\n".join([*out[:at], verdict, "", *out[at:], *recheck_section(recheck)]) + "\n"


def recheck_section(rows: Sequence[dict[str, str]]) -> list[str]:
    if not rows:
        return []
    seeds = sorted({int(r["seed"]) for r in rows})
    out = ["## The separated comparisons, rechecked", "",
           f"Each comparison above that separated, rerun on {len(seeds)} fresh seeds"
           f" ({seeds[0]}..{seeds[-1]}; `--recheck {len(seeds)}`), same format.", "",
           "| profile | trace | against | mean E2E | throughput |", "|---|---|---|---|---|"]
    for (profile, trace), runs in by_cell(rows).items():
        for other in (o for o in OTHERS if o in runs):
            cols = [paired(runs, other, metric, up) for metric, _, up in METRICS]
            out.append(f"| {profile} | {trace} | {other} | " +
                       " | ".join("-" if c is None else c[0] for c in cols) + " |")
    return [*out, ""]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("reports/memory"))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--render-only", action="store_true")
    parser.add_argument("--recheck", type=int, default=0, metavar="N",
                        help="rerun each separated comparison on N fresh seeds")
    parser.add_argument("--reuse", action="store_true",
                        help="keep rows.csv as it is: only the recheck runs")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / "rows.csv"
    command = f"python experiments/memory_default.py --out {args.out} --seeds {args.seeds}"
    if not args.render_only and not args.reuse:
        everyone = (SUBJECT, *OTHERS)
        run_all([(p, t, s, everyone) for p, t, s in
                 itertools.product(PROFILES, TRACES, range(args.seeds))], table, args.jobs)
    rows = read(table)
    again = args.out / "recheck.csv"
    if not args.render_only:
        # A recheck belongs to the table it rechecked.
        again.unlink(missing_ok=True)
        fresh = range(args.seeds, args.seeds + args.recheck)
        if args.recheck:
            run_all([(p, t, s, (SUBJECT, o)) for p, t, o in separated(rows) for s in fresh],
                    again, args.jobs)
    recheck = read(again) if again.exists() else []
    if recheck:
        command += f" --recheck {len({r['seed'] for r in recheck})}"
    (args.out / "README.md").write_text(render(rows, args.seeds, command, recheck))
    print(f"wrote {args.out / 'README.md'}")
    return 0


def run_all(jobs: Sequence[tuple[str, str, int, tuple[str, ...]]], path: Path,
            workers: int) -> None:
    with ProcessPoolExecutor(workers) as pool, path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        for done, rows in enumerate(pool.map(run_group, jobs), 1):
            writer.writerows(rows)
            f.flush()
            print(f"{done}/{len(jobs)}", flush=True)


def read(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


if __name__ == "__main__":
    raise SystemExit(main())
