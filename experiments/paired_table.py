"""Paired per-seed differences from a ``nightjar sim --seeds N --out DIR`` folder.

    python experiments/paired_table.py DIR [--ref nightjar+] [--slo] [--skip POLICY ...]

Reads ``DIR/seed-*/summary.csv`` and prints the markdown tables of the "Long
contexts" section of docs/policies.md: per policy the mean and 95% interval over
the seeds of throughput, TTFT and TPOT (and SLO attainment with ``--slo``), then
``REF minus it`` per seed, on the same arrivals and acceptance draws (each seed
re-draws both, for every policy alike), with its mean and 95% interval
(``nightjar.results.stats.mean_interval``). A paired interval that excludes 0 is a
difference the run shows; one that includes 0 is not.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Callable
from pathlib import Path

from nightjar.results.stats import mean_interval

Row = dict[str, str]
COLUMNS: dict[str, tuple[Callable[[Row], float], str]] = {
    "tok/s": (lambda r: float(r["throughput_tok_s"]), "{:.0f}"),
    "TTFT s": (lambda r: float(r["ttft_s_mean"]), "{:.2f}"),
    "TPOT ms": (lambda r: 1e3 * float(r["tpot_s_mean"]), "{:.1f}"),
    "SLO %": (lambda r: 100.0 * float(r["slo_attainment"]), "{:.1f}"),
}


def load(folder: Path) -> dict[str, dict[int, Row]]:
    """policy -> seed -> its summary row, policies in the order the run listed them."""
    out: dict[str, dict[int, Row]] = {}
    for path in sorted(folder.glob("seed-*/summary.csv")):
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                out.setdefault(row["policy"], {})[int(row["seed"])] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--ref", default="nightjar+")
    parser.add_argument("--slo", action="store_true", help="add the SLO attainment column")
    parser.add_argument("--skip", nargs="*", default=[], help="policies to leave out")
    args = parser.parse_args()
    runs = load(args.folder)
    if args.ref not in runs:
        sys.exit(f"no runs of {args.ref} under {args.folder}")
    cols = [c for c in COLUMNS if args.slo or c != "SLO %"]
    ref = runs[args.ref]
    head = ["policy", *cols, *(f"{args.ref} minus it: {c}" for c in cols)]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for policy, seeds in runs.items():
        if policy in args.skip:
            continue
        cells = [f"`{policy}`"]
        for c in cols:
            get, fmt = COLUMNS[c]
            cells.append(mean_interval([get(r) for r in seeds.values()]).format(fmt))
        for c in cols:
            get, fmt = COLUMNS[c]
            if policy == args.ref:
                cells.append("-")
                continue
            # Paired: the same seed's runs share the arrivals and acceptance draws.
            diffs = [get(ref[s]) - get(r) for s, r in seeds.items() if s in ref]
            cells.append(mean_interval(diffs).format(fmt))
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
