"""Profiles fitted from live runs, validated on a trace they never saw (issue 41).

    .venv/bin/python experiments/fit_from_runs.py reports/simulator/agreement-20261203d \
        --out reports/simulator/fit-from-runs

For each benchmark ``AGREE/bench-<trace>/`` in turn held out: a profile fitted from the
other benchmarks' steps on ``AGREE/profile.json`` (``nightjar profile --from-run``), then
``nightjar validate`` over the held-out benchmark with the measured profile and with the
fitted one, the same seed and settings. Writes ``OUT/errors.csv`` (every policy and
metric, both profiles) and ``OUT/README.md`` (the tables, the commands, the times).
Every number comes from the commands' own files. ``--profile P`` fits on another base
(a grid cut by ``experiments/profile_subset.py``); ``--held-out-only`` skips the
odd/even-round splits.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

METRICS = {"throughput_tok_s": "throughput", "ttft_s_mean": "mean TTFT",
           "tpot_s_mean": "mean TPOT", "e2e_s_mean": "mean E2E",
           "mean_batch_size": "mean batch"}


def nightjar(*args: str) -> tuple[str, float]:
    cmd = [str(Path(sys.executable).parent / "nightjar"), *args]
    started = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"failed ({done.returncode}): {shlex.join(cmd)}\n{done.stderr}")
    return done.stdout, time.monotonic() - started


def subset(bench: Path, rounds: set[int], dest: Path) -> Path:
    """A benchmark folder holding only ``rounds`` of ``bench`` (links to its rounds)."""
    dest.mkdir(parents=True, exist_ok=True)
    meta = json.loads((bench / "bench.json").read_text())
    meta["runs"] = [r for r in meta["runs"] if r["round"] in rounds]
    (dest / "bench.json").write_text(json.dumps(meta))
    for r in rounds:
        link = dest / f"round-{r}"
        if not link.is_symlink():
            os.symlink(os.path.relpath(bench / f"round-{r}", dest), link)
    return dest


# (label, which profile, time base): every held-out benchmark is validated each way.
PROFILES = (("measured", "measured", "profile"), ("fitted", "fitted", "profile"),
            ("measured (run base)", "measured", "run"), ("fitted (run base)", "fitted", "run"))
PAIRS: list[pd.DataFrame] = []  # every validation's pairs.csv, tagged like its errors


def validate_both(held: Path, base: Path, fitted: Path, folder: Path, **tags: str
                  ) -> list[pd.DataFrame]:
    """``nightjar validate`` over ``held`` on the measured and on the fitted profile, at
    each profile's own speed and at each run's (``--time-base run``)."""
    frames = []
    for label, profile, time_base in PROFILES:
        out = folder.parent / (f"{folder.name}-{profile}"
                               + ("-run-base" if time_base == "run" else ""))
        nightjar("validate", "--live-run", str(held),
                 "--profile", str(base if profile == "measured" else fitted),
                 "--time-base", time_base, "--out", str(out), "--force")
        frames.append(pd.read_csv(out / "errors.csv").assign(profile=label, **tags))
        PAIRS.append(pd.read_csv(out / "pairs.csv").assign(profile=label, **tags))
    return frames


def ordering(pairs: pd.DataFrame) -> str:
    """Pairs the engine separates (status other than unresolved) and how many of them
    the simulator orders the same way, per profile, over the five metrics."""
    judged = pairs[pairs["metric"].isin(METRICS)]
    parts = []
    for label, rows in judged.groupby("profile", sort=False):
        separated = rows[rows["status"] != "unresolved"]
        same = int((separated["status"] == "same").sum())
        parts.append(f"{label} {same} of {len(separated)}")
        for _, r in separated[separated["status"] != "same"].iterrows():
            parts[-1] += (f" (miss: {METRICS[r['metric']]} {r['a']} vs {r['b']}, live "
                          f"{r['live_diff_pct']:+.1f} ± {r['live_half_pct']:.1f}%, sim "
                          f"{r['sim_diff_pct']:+.1f}%)")
    return "Pairs the engine separates, ordered the same by the simulator: " + "; ".join(
        parts) + "."


def cell(row: pd.Series) -> str:
    if row["rounds"] < 2:
        return f"{row['error_pct']:+.1f}"  # one round: no interval
    half = (row["error_hi"] - row["error_lo"]) / 2
    return f"{row['error_pct']:+.1f} ± {half:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("agree", type=Path, help="an agreement folder (scripts/agreement.sh)")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--profile", type=Path, help="the base profile (default AGREE/profile.json)")
    ap.add_argument("--held-out-only", action="store_true",
                    help="skip the odd-rounds -> even-rounds fits")
    args = ap.parse_args()
    benches = sorted(p for p in args.agree.glob("bench-*") if p.is_dir())
    base = args.profile or args.agree / "profile.json"
    args.out.mkdir(parents=True, exist_ok=True)
    frames, lines = [], []
    for held in benches:
        trace = held.name.removeprefix("bench-")
        fitted = args.out / f"profile-without-{trace}.json"
        others = [str(b) for b in benches if b != held]
        shown, fit_s = nightjar("profile", "--from-run", *others, "--base", str(base),
                                "--out", str(fitted), "--force")
        lines += [f"### held out: `{trace}`", "", "```", f"$ nightjar profile --from-run "
                  f"{' '.join(others)} --base {base} --out {fitted}", shown.rstrip(), "```",
                  f"fit: {fit_s:.1f} s wall, including start-up", ""]
        frames += validate_both(held, base, fitted, args.out / f"validate-{trace}",
                                trace=trace, split="held-out trace")
    # The same deployment's earlier runs: fit on a trace's odd rounds, validate on its
    # even ones (what refining a profile from one's own runs gives the next simulation).
    for bench in [] if args.held_out_only else benches:
        trace = bench.name.removeprefix("bench-")
        meta = json.loads((bench / "bench.json").read_text())
        rounds = sorted({r["round"] for r in meta["runs"]})
        odd, even = {r for r in rounds if r % 2}, {r for r in rounds if not r % 2}
        split = args.out / "splits" / trace
        fitted = args.out / f"profile-{trace}-odd-rounds.json"
        nightjar("profile", "--from-run", str(subset(bench, odd, split / "odd")), "--base",
                 str(base), "--out", str(fitted), "--force")
        frames += validate_both(subset(bench, even, split / "even"), base, fitted,
                                args.out / f"validate-{trace}-even", trace=trace,
                                split="odd rounds -> even rounds")
    table = pd.concat(frames, ignore_index=True)
    table.to_csv(args.out / "errors.csv", index=False)
    pd.concat(PAIRS, ignore_index=True).to_csv(args.out / "pairs.csv", index=False)
    (args.out / "README.md").write_text(report(table, lines, args))


def report(table: pd.DataFrame, fits: list[str], args: argparse.Namespace) -> str:
    out = ["# Profiles fitted from runs, validated on a held-out trace", "",
           "Generated by `experiments/fit_from_runs.py`:", "",
           "    .venv/bin/python experiments/fit_from_runs.py "
           + shlex.join([str(args.agree), "--out", str(args.out),
                         *(["--profile", str(args.profile)] if args.profile else []),
                         *(["--held-out-only"] if args.held_out_only else [])]),
           "",
           "Each benchmark's trace is held out in turn: the profile is fitted from the other "
           "benchmarks' live steps on the measured profile (`--profile`, default "
           "AGREE/profile.json), then `nightjar validate` "
           "replays the held-out benchmark on the measured and on the fitted profile. "
           "Entries: simulated minus live, % of live, mean ± 95% half-width over the "
           "benchmark's rounds; \"(run base)\": each run priced at its own speed "
           "(`--time-base run`: the profile times the median live / priced ratio of the "
           "run's own pure decode steps), which takes out the machine's drift between "
           "runs and leaves the profile's shape and the scheduling. A second set of "
           "tables fits each trace's odd rounds and "
           "validates its even ones: the same deployment's earlier runs, as a user "
           "refining a profile from their own runs has them. \"Within 10%\" counts the "
           "entries whose mean error is at most 10% either way (`nightjar validate`'s "
           "`within_10`); where its interval is wide, that alone does not show agreement.", ""]
    for (split, trace), part in table.groupby(["split", "trace"], sort=False):
        title = (f"`{trace}` held out" if split == "held-out trace"
                 else f"`{trace}`: fitted on its odd rounds, validated on its even ones")
        rounds = int(part["rounds"].max())
        out += [f"## {title}", "", f"{rounds} round(s) validated.", "",
                "| policy | metric | " + " | ".join(f"{label} profile" for label, _, _ in
                                                   PROFILES) + " |",
                "|---|---|" + "---|" * len(PROFILES)]
        for (policy, metric), rows in part.groupby(["policy", "metric"], sort=False):
            if metric not in METRICS:
                continue
            by = {r["profile"]: cell(r) for _, r in rows.iterrows()}
            out.append(f"| {policy} | {METRICS[metric]} | "
                       + " | ".join(by.get(label, "-") for label, _, _ in PROFILES) + " |")
        judged = part[part["metric"].isin(METRICS)]
        within = {label: int(rows["within_10"].astype(bool).sum())
                  for label, rows in judged.groupby("profile")}
        # Not shown outside the band: the interval reaches ±10% (what rounds this few
        # can say where the noise floor is wider than the band).
        reach = {label: int(((rows["error_lo"] <= 10) & (rows["error_hi"] >= -10)).sum())
                 for label, rows in judged.groupby("profile")}
        total = int((judged["profile"] == "measured").sum())
        out += ["", "Within 10%: " + "; ".join(f"{label} {within.get(label, 0)} of {total}"
                                               for label, _, _ in PROFILES) + ".",
                "Interval reaches ±10%: " + "; ".join(
                    f"{label} {reach.get(label, 0)} of {total}"
                    for label, _, _ in PROFILES) + ".", ""]
        pairs = pd.concat(PAIRS, ignore_index=True)
        mine = pairs[(pairs["split"] == split) & (pairs["trace"] == trace)]
        if len(mine):
            out += [ordering(mine), ""]
    return "\n".join([*out, "## The fits", "", *fits]) + "\n"


if __name__ == "__main__":
    main()
