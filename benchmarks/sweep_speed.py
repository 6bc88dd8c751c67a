"""Sweep speed: a 100-cell sweep of 10-minute traces, and Ray scaling at 1 and 2 workers.

The trace is the bundled ``alpaca-burst`` pattern (4 -> 20 -> 60 -> 10 req/s, 30 s
each, Alpaca-like lengths; the unsaturated variant of the paper's bursty load) played
five times: 600 s, about 14000 requests at rate scale 1. The grid:
rate scales 0.5, 0.75, 1, 1.25 x policies nospec, fixed:1, fixed:3, nightjar+, dsd
x 5 seeds = 100 cells, run by ``nightjar sweep --jobs 2`` (report included), timed
from the command's start to its exit. Goal: under 60 s on 2 quiet cores (issue 26).

(The paper's ``nightjar`` bandit is left out: on ``burst`` played four times it
raised ZeroDivisionError in one cell of twenty when this was written.)

Ray scaling: the 20 cells at rate scale 1 (nospec, fixed:3, nightjar+, dsd x 5
seeds), on a private local Ray (``--ray local``) with 1 and 2 CPUs, against local
processes with ``--jobs`` 1 and 2; Ray's start-up is timed apart from the cells.
Each measurement runs in a fresh process and output folder, so nothing is resumed.
The 1-minute load average is printed before and after: on a shared machine the
figures are upper bounds.

    python benchmarks/sweep_speed.py [--skip-full] [--skip-ray] [--python PYTHON]

``--python``: time the nightjar another interpreter has installed (say, a regular
install's compiled step loop, where this one runs the sources).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# Commands run here, never in the checkout, whose nightjar/ (the Python sources) would
# shadow the interpreter's installed one (a regular install's is compiled: setup.py).
NEUTRAL = tempfile.gettempdir()
POLICIES = ["nospec", "fixed:1", "fixed:3", "nightjar+", "dsd"]
RAY_POLICIES = ["nospec", "fixed:3", "nightjar+", "dsd"]
SCALES = "0.5,0.75,1,1.25"
SEEDS = 5


def ten_minute_trace(folder: Path) -> Path:
    from nightjar.trace.schema import parse_trace_json

    base = json.loads((REPO / "nightjar" / "traces" / "alpaca-burst.json").read_text())
    doc = {**base, "name": "alpaca-burst-x5", "segments": base["segments"] * 5,
           "description": "alpaca-burst.json's segments five times (600 s)"}
    parse_trace_json(doc, "alpaca-burst-x5", "alpaca-burst-x5")  # validate before timing
    path = folder / "alpaca-burst-x5.json"
    path.write_text(json.dumps(doc))
    return path


def sweep_cmd(python: str, trace: Path, out: Path, scales: str, policies: list[str]
              ) -> list[str]:
    cmd = [python, "-m", "nightjar.cli", "sweep", "--trace", str(trace),
           "--rate-scale", scales, "--seeds", str(SEEDS), "--out", str(out), "--quiet"]
    for p in policies:
        cmd += ["--policy", p]
    return cmd


def timed(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and its workers)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=NEUTRAL)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def ray_child(trace: str, out: str, workers: int) -> None:
    """In a fresh process: start a private Ray, then time the sweep alone."""
    from nightjar.sweep.backends import connect_ray
    from nightjar.sweep.run import run_sweep
    from nightjar.sweep.spec import build_spec

    started = time.perf_counter()
    connect_ray("local", workers)
    init_s = time.perf_counter() - started
    spec = build_spec({"trace": [trace], "rate_scale": [1.0], "seeds": SEEDS,
                       "policy": RAY_POLICIES})
    started = time.perf_counter()
    outcome = run_sweep(spec, Path(out), ray="local", jobs=workers, report=False)
    print(json.dumps({"init_s": init_s, "sweep_s": time.perf_counter() - started,
                      "cells": outcome.computed}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-full", action="store_true", help="skip the 100-cell sweep")
    parser.add_argument("--skip-ray", action="store_true", help="skip the Ray scaling")
    parser.add_argument("--python", default=sys.executable,
                        help="the interpreter whose nightjar runs the sweeps (default: this one)")
    parser.add_argument("--ray-child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ray_child:
        trace, out, workers = args.ray_child
        ray_child(trace, out, int(workers))
        return
    if os.sep in args.python:  # a path, run from NEUTRAL (not resolved: a venv's is a link)
        args.python = os.path.abspath(args.python)
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    build = subprocess.run(
        [args.python, "-c",
         "import nightjar.sim as s; print(getattr(s, 'COMPILED', False))"],  # older: none
        capture_output=True, text=True, cwd=NEUTRAL, check=True).stdout.strip()
    print(f"{args.python}: the simulator "
          f"{'compiled with mypyc' if build == 'True' else 'from the Python sources'}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        trace = ten_minute_trace(folder)
        if not args.skip_full:
            wall, cpu = timed([*sweep_cmd(args.python, trace, folder / "full", SCALES, POLICIES),
                               "--jobs", "2"])
            # CPU time / 2 is what 2 quiet cores would need at best: contention from
            # other processes stretches the wall time, hardly the CPU time.
            print(f"100 cells, 10-minute traces, --jobs 2: {wall:.1f} s wall "
                  f"({wall / 100:.2f} s per cell; goal < 60 s); {cpu:.0f} CPU s, "
                  f"so >= {cpu / 2:.0f} s on 2 quiet cores")
        if not args.skip_ray:
            print(f"20 cells (rate scale 1, {' '.join(RAY_POLICIES)} x {SEEDS} seeds):")
            for jobs in (1, 2):
                wall, cpu = timed([*sweep_cmd(args.python, trace, folder / f"local{jobs}", "1",
                                              RAY_POLICIES), "--jobs", str(jobs), "--no-report"])
                print(f"  local --jobs {jobs}: {wall:.1f} s ({cpu:.0f} CPU s)")
            for workers in (1, 2):
                proc = subprocess.run(
                    [args.python, __file__, "--ray-child", str(trace),
                     str(folder / f"ray{workers}"), str(workers)],
                    capture_output=True, text=True, cwd=NEUTRAL,
                    env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"},
                )
                if proc.returncode != 0:
                    raise SystemExit(proc.stderr)
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                print(f"  ray local, {workers} worker(s): {r['sweep_s']:.1f} s for the cells "
                      f"(+ {r['init_s']:.1f} s Ray start-up)")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
