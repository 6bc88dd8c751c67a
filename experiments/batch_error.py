"""Where in the batch range does the profile misprice live steps? (issue 21)

Every step of every run of a ``nightjar bench live`` folder priced by the simulator
(:func:`nightjar.fidelity.compare.priced_steps`, the step replay of ``nightjar validate``),
grouped by policy and batch range: the error of the total (priced / live - 1) over
the decode steps (or ``--kind mixed``), and the steps counted, as a markdown table.

    python experiments/batch_error.py BENCH_DIR PROFILE [--kind decode|mixed]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from nightjar.errors import NightjarInputError
from nightjar.fidelity.compare import priced_steps
from nightjar.profile.profile import load_profile
from nightjar.results.bench import read_bench

EDGES = (0, 1, 4, 16, 32, 48, 64, 10_000)


def frame(bench: Path, profile_path: str, kind: str) -> pd.DataFrame:
    record = read_bench(bench)
    profile = load_profile(profile_path)
    sync = record.meta.get("draft_kv") == "sync"
    runs = [priced_steps(run.result, profile, sync).assign(policy=run.label)
            for run in record.runs]
    df = pd.concat(runs)
    return df[df.kind == kind]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench")
    parser.add_argument("profile")
    parser.add_argument("--kind", default="decode", choices=("decode", "mixed"))
    args = parser.parse_args()
    try:
        df = frame(Path(args.bench), args.profile, args.kind)
    except NightjarInputError as exc:  # a missing or damaged folder or profile: one line
        raise SystemExit(f"batch_error: {exc}") from None
    df = df.assign(range=pd.cut(df.batch_size, list(EDGES)))
    cats = df["range"].cat.categories
    labels = [f"> {int(iv.left)}" if iv.right == EDGES[-1] else str(int(iv.right))
              if iv.right - iv.left == 1 else f"{int(iv.left) + 1}-{int(iv.right)}"
              for iv in cats]
    print(f"| policy ({args.kind}) | " + " | ".join(f"B {x}" for x in labels) + " |")
    print("|---" * (len(labels) + 1) + "|")
    for policy, g in df.groupby("policy", sort=False):
        cells = []
        for iv in cats:
            sel = g[g["range"] == iv]
            if sel.empty:
                cells.append("-")
            else:
                err = 100 * (sel.priced_s.sum() / sel.step_time_s.sum() - 1)
                cells.append(f"{err:+.1f}% ({len(sel)})")
        print(f"| {policy} | " + " | ".join(cells) + " |")

if __name__ == "__main__":
    main()
