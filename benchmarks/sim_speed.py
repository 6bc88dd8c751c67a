"""Simulator speed: simulated seconds per wall-clock second, and peak memory.

Runs ``burst`` with ``fixed:3`` and a one-hour trace at 35 req/s (ShareGPT lengths)
on the default profile, each in a fresh process so peak memory is its own.
Goal: >= 1000x real time on one core, under 500 MB.

    python benchmarks/sim_speed.py [--profile-hot-loop]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import subprocess
import sys
import time

CASES = {
    "burst/fixed:3": ("burst", "fixed:3", None),
    "1h@35rps/fixed:3": ("@segments", "fixed:3", 3600.0),
}


def _trace(name: str, duration: float | None):  # type: ignore[no-untyped-def]
    from nightjar.trace.model import load_trace, materialize
    from nightjar.trace.schema import parse_trace_json

    if duration is None:
        return load_trace(name)
    doc = {
        "format_version": 1, "name": "steady-1h-35rps", "seed": 0, "workload": "sharegpt",
        "segments": [{"duration_s": duration, "rate_rps": 35.0, "burstiness": 1.0}],
    }
    return materialize(parse_trace_json(doc, "<benchmark>", "steady-1h-35rps"))


def child(case: str, hot_loop: bool) -> None:
    from nightjar.profile.model import DEFAULT_PROFILE, load_profile
    from nightjar.sim import SimConfig, simulate

    name, policy, duration = CASES[case]
    trace = _trace(name, duration)
    profile = load_profile(DEFAULT_PROFILE)
    prof = cProfile.Profile() if hot_loop else None
    started = time.perf_counter()
    if prof:
        prof.enable()
    result = simulate(trace, profile, policy, SimConfig(seed=0))
    if prof:
        prof.disable()
    wall = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({
        "case": case, "requests": len(trace), "steps": len(result.steps),
        "simulated_s": result.duration_s, "wall_s": wall,
        "speedup": result.duration_s / wall, "peak_mb": peak_mb,
        "us_per_step": 1e6 * wall / max(len(result.steps), 1),
    }))
    if prof:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile-hot-loop", action="store_true",
                        help="print a cProfile of each run (to stderr)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.profile_hot_loop)
        return
    print(f"{'case':<20} {'requests':>9} {'steps':>8} {'sim s':>8} {'wall s':>8} "
          f"{'x real':>8} {'us/step':>8} {'peak MB':>8}")
    for case in CASES:
        cmd = [sys.executable, __file__, "--child", case]
        if args.profile_hot_loop:
            cmd.append("--profile-hot-loop")
        out = subprocess.run(cmd, check=True, capture_output=True, text=True)
        if args.profile_hot_loop:
            print(out.stderr, file=sys.stderr)
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{r['case']:<20} {r['requests']:>9} {r['steps']:>8} {r['simulated_s']:>8.0f} "
              f"{r['wall_s']:>8.2f} {r['speedup']:>8.0f} {r['us_per_step']:>8.1f} "
              f"{r['peak_mb']:>8.0f}")


if __name__ == "__main__":
    main()
