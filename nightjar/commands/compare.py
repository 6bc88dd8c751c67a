"""``nightjar compare``: run folders side by side, each against the first, paired by seed."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from nightjar.errors import NightjarInputError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "compare", help="compare run folders policy by policy, paired by seed",
        description="Put run folders (nightjar sim, sim --seeds, live) side by side: for "
        "every policy the first folder shares with another, each metric's difference "
        "(other - first) paired over the seeds both ran, with its 95%% interval; a "
        "difference is claimed only where the interval excludes zero. The settings in "
        "which the folders differ are named first.",
    )
    p.add_argument("folders", nargs="+", type=Path, metavar="FOLDER",
                   help="run folders; the first is the baseline")
    p.add_argument("--policy", action="append", default=None,
                   help="compare only this policy (repeatable; default: every shared one)")
    p.add_argument("--out", type=Path, default=None,
                   help="also write the rows to OUT/compare.csv")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.set_defaults(func=run)


def _labels(folders: list[Path]) -> list[str]:
    """Each folder's name, or its path where two names collide."""
    names = [f.name or str(f) for f in folders]
    return [n if names.count(n) == 1 else str(f) for n, f in zip(names, folders, strict=True)]


def _load(folders: list[Path]) -> list[Any]:
    from nightjar.api import load_run
    from nightjar.results.comparison import RunSet

    sets = []
    for label, folder in zip(_labels(folders), folders, strict=True):
        results = load_run(folder)
        if results.table is not None:
            raise NightjarInputError(
                f"{folder} is a sweep: its cells are one table (results.csv), not runs to"
                " pair; compare the run folders of `nightjar sim`, `sim --seeds` or `live`")
        sets.append(RunSet(label, results.runs))
    return sets


def run(args: argparse.Namespace) -> int:
    from nightjar.results.comparison import compare_rows, setting_changes

    if len(args.folders) < 2:
        raise NightjarInputError("compare needs two run folders at least (the first is the"
                                 " baseline)")
    if len(set(map(str, args.folders))) < len(args.folders):
        raise NightjarInputError("a folder is given twice: compare needs distinct folders")
    if args.out is not None:
        from nightjar.results.outdir import check_out_dir

        check_out_dir(args.out, args.force)  # before the reading, not after it
    sets = _load(args.folders)
    if args.policy:
        from nightjar.results.comparison import RunSet

        sets = [RunSet(s.label, [r for r in s.runs if r.policy in args.policy]) for s in sets]
    rows = compare_rows(sets)
    if not rows:
        wanted = f" among {', '.join(args.policy)}" if args.policy else ""
        raise NightjarInputError(f"{sets[0].label} shares no policy{wanted} with the other"
                                 " folders: nothing to pair")
    console = Console()
    for line in setting_changes(sets):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print(_table(rows))
    if args.out is not None:
        _write(rows, args.out, args.force)
        console.print(f"wrote {args.out}/compare.csv")
    return 0


def _table(rows: list[dict[str, Any]]) -> Table:
    """Policy by policy; the ``vs`` column only with several later folders, the verdict
    only where a pair has an interval (two shared seeds or more)."""
    many = len({r["other"] for r in rows}) > 1
    paired = any(r["seeds"] > 1 for r in rows)
    seeds = "/".join(map(str, sorted({r["seeds"] for r in rows})))
    base = rows[0]["baseline"]
    title = f"{'each folder' if many else rows[0]['other']} - {base}, per policy"
    caption = (f"paired over {seeds} shared seed(s): mean difference ± 95% half-width; a"
               " difference is claimed only where the interval excludes zero" if paired else
               "one shared seed: differences without intervals (run both with --seeds N"
               " for paired 95% intervals)")
    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, pad_edge=False)
    heads = ["policy", *(["vs"] if many else []), "metric", base,
             "other" if many else rows[0]["other"], "difference",
             "%", *(["verdict"] if paired else [])]
    for head in heads:
        left = head in ("policy", "vs", "metric", "verdict")
        table.add_column(head, justify="left" if left else "right", overflow="fold",
                         no_wrap=head != "verdict", min_width=9 if head == "verdict" else None)
    last = None
    for r in rows:
        key = (r["policy"], r["other"])
        if last is not None and key != last:
            table.add_section()
        shown = r["policy"] if key != last else ""
        last = key
        half = (r["diff_hi"] - r["diff_lo"]) / 2
        diff = f"{r['diff']:+.3g}"
        if r["seeds"] > 1 and math.isfinite(half):
            diff += f"±{half:.2g}"
        cells = [shown, *([r["other"]] if many else []), r["label"],
                 f"{r['baseline_mean']:.4g}", f"{r['other_mean']:.4g}", diff,
                 f"{r['diff_pct']:+.1f}", *([r["verdict"]] if paired else [])]
        table.add_row(*cells)
    return table


def _write(rows: list[dict[str, Any]], out: Path, force: bool) -> None:
    import pandas as pd

    from nightjar.results.outdir import staged_out_dir
    from nightjar.results.write import write_frame

    with staged_out_dir(out, force) as tmp:
        write_frame(pd.DataFrame(rows), tmp / "compare")
