"""``nightjar export``: a run folder's runs in another tool's result format."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "export", help="write a run folder's runs in another tool's result format",
        description="Write every run of a folder (nightjar sim, sim --seeds, live) as the "
        "JSON `vllm bench serve --save-result` writes: one file per policy and seed, "
        "OUT/POLICY[-seed-S].json, with vLLM's throughput, TTFT, TPOT, ITL and E2EL "
        "figures (mean, median, std, p90/p95/p99, in ms).",
    )
    p.add_argument("folder", type=Path, metavar="FOLDER", help="a run folder")
    p.add_argument("--format", choices=["vllm-bench"], default="vllm-bench",
                   help="vllm-bench: vLLM's benchmark result JSON")
    p.add_argument("--out", type=Path, required=True, help="output folder")
    p.add_argument("--force", action="store_true", help="write into a non-empty --out folder")
    p.set_defaults(func=run)


def _finite(value: Any) -> Any:
    """JSON without NaN or infinity (strict readers refuse them): None instead."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def run(args: argparse.Namespace) -> int:
    from nightjar.api import load_run
    from nightjar.results.outdir import check_out_dir, staged_out_dir
    from nightjar.results.vllm_bench import bench_result

    src, dst = args.folder.resolve(), args.out.resolve()
    if src == dst or src in dst.parents or dst in src.parents:
        raise NightjarInputError(f"--out {args.out} overlaps the run folder {args.folder}: "
                                 "--force would replace the run; choose another folder")
    check_out_dir(args.out, args.force)  # before the reading, not after it
    results = load_run(args.folder)
    if results.table is not None:
        raise NightjarInputError(f"{args.folder} is a sweep: export its cells' run folders")
    runs = list(results.runs)
    if not runs:
        raise NightjarInputError(f"{args.folder} holds no run")
    several = len({r.seed for r in runs}) > 1
    names = [f"{r.policy.replace(':', '_').replace('/', '_')}"
             f"{f'-seed-{r.seed}' if several else ''}.json" for r in runs]
    if len(set(names)) < len(names):
        raise NightjarInputError(f"{args.folder} holds one policy and seed twice")
    with staged_out_dir(args.out, args.force) as tmp:
        for name, result in zip(names, runs, strict=True):
            text = json.dumps(_finite(bench_result(result)), indent=1, allow_nan=False)
            (tmp / name).write_text(text + "\n", encoding="utf-8")
    print(f"wrote {args.out}: {len(runs)} run(s) as vLLM benchmark results ({', '.join(names)})")
    return 0
