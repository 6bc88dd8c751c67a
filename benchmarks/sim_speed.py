"""Simulator speed: simulated seconds per wall-clock second, and peak memory.

Runs ``burst`` with ``fixed:3`` and a one-hour trace at 35 req/s (ShareGPT lengths)
on the default profile, each in a fresh process so peak memory is its own.
Goal (issue 26, this 2-core machine): >= 3000x real time on the hour, >= 1500x on
``burst``, peak memory under 300 MB.

    python benchmarks/sim_speed.py [--profile-hot-loop] [--case NAME]

Against a reference, in one run (a slowdown shows as a number, not a feeling)::

    python benchmarks/sim_speed.py --against f8ba7cd --against ab91d99 [--repeats 3]
    python benchmarks/sim_speed.py --against-python /path/to/other/venv/bin/python

``--against REV`` exports the commit with ``git archive`` (no worktree is added) into
a cache folder (``$XDG_CACHE_HOME/nightjar-sim-speed/<sha>``, or ``--ref-cache``),
makes a virtual environment there and installs the export into it with ``pip install
--no-deps`` (a regular, non-editable install, so old layouts with a setuptools
``package-dir`` mapping install as they did then); a ``.pth`` file makes this
interpreter's site-packages (numpy, simpy, ...) visible after the reference's own
package, so nothing else is installed and nothing touches ``sys.path`` by hand. The
first use of a commit takes a few seconds; later runs reuse the folder.
``--against-python`` times any interpreter that has nightjar installed.

The ``build`` column says how each side's step loop was built: ``C`` where mypyc
compiled it (a regular install, setup.py), ``py`` where the Python sources run (an
editable install such as a development venv's, or a commit from before setup.py). A
reference is a regular install, so ``--against HEAD`` times the compiled build of the
last commit against this interpreter's (in a development venv, the sources)::

    python benchmarks/sim_speed.py --against HEAD --against f8ba7cd --repeats 3

Every measurement is a fresh process running this file's ``--child`` (the same
timing code for every side: the child finds the trace, profile and simulator
modules under the names the installed version uses). For each case the sides run
alternately (current, ref1, ref2, current, ...) ``--repeats`` times, and the table
gives medians: ``wall s`` the simulation alone (``cpu s`` its CPU time, steadier
on a busy machine), ``proc s`` the whole process
(interpreter start, imports, trace generation), steps, microseconds per step,
simulated seconds per wall second and peak RSS; then each reference's wall time
over the current tree's (> 1: the current tree is faster). The machine's load
average is printed before and after: on a shared machine only the ratios mean much.
"""

from __future__ import annotations

import argparse
import cProfile
import importlib
import json
import os
import pstats
import resource
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
CASES = {
    "burst/fixed:3": ("burst", "fixed:3", None),
    "1h@35rps/fixed:3": ("@segments", "fixed:3", 3600.0),
}


def _find(attr: str, *modules: str) -> Any:
    """``attr`` from the first of ``modules`` that has it: the package's layout moved
    (``nightjar.trace`` became ``nightjar.trace.trace``), the names did not."""
    for name in modules:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, attr):
            return getattr(module, attr)
    raise SystemExit(f"no module of {modules} has {attr!r}")


def _trace(name: str, duration: float | None) -> Any:
    load_trace = _find("load_trace", "nightjar.trace.trace", "nightjar.trace")
    if duration is None:
        return load_trace(name)
    materialize = _find("materialize", "nightjar.trace.trace", "nightjar.trace")
    parse = _find("parse_trace_json", "nightjar.trace.schema", "nightjar.trace_schema")
    doc = {
        "format_version": 1, "name": "steady-1h-35rps", "seed": 0, "workload": "sharegpt",
        "segments": [{"duration_s": duration, "rate_rps": 35.0, "burstiness": 1.0}],
    }
    return materialize(parse(doc, "<benchmark>", "steady-1h-35rps"))


def child(case: str, hot_loop: bool) -> None:
    default = _find("DEFAULT_PROFILE", "nightjar.profile.profile", "nightjar.profile")
    load_profile = _find("load_profile", "nightjar.profile.profile", "nightjar.profile")
    sim = importlib.import_module("nightjar.sim")

    name, policy, duration = CASES[case]
    trace = _trace(name, duration)
    profile = load_profile(default)
    prof = cProfile.Profile() if hot_loop else None
    started, cpu_started = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    result = sim.simulate(trace, profile, policy, sim.SimConfig(seed=0))
    if prof:
        prof.disable()
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({
        "case": case, "compiled": bool(getattr(sim, "COMPILED", False)),
        "requests": len(trace), "steps": len(result.steps),
        "simulated_s": result.duration_s, "wall_s": wall, "cpu_s": cpu,
        "speedup": result.duration_s / wall, "peak_mb": peak_mb,
        "us_per_step": 1e6 * wall / max(len(result.steps), 1),
    }))
    if prof:
        pstats.Stats(prof, stream=sys.stderr).sort_stats("tottime").print_stats(15)


def run_child(python: str, case: str, hot_loop: bool = False) -> dict[str, Any]:
    cmd = [python, __file__, "--child", case]
    if hot_loop:
        cmd.append("--profile-hot-loop")
    # A neutral working directory: the interpreter's installed nightjar is what runs,
    # never a ``nightjar/`` folder that happens to sit where the command was typed.
    started = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir())
    proc_s = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{out.stderr}")
    if hot_loop:
        print(out.stderr, file=sys.stderr)
    r: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    r["proc_s"] = proc_s
    return r


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True,
                          text=True).stdout.strip()


def reference_python(rev: str, cache: Path) -> str:
    """An interpreter with commit ``rev`` of nightjar installed (built once, cached)."""
    sha = _git("rev-parse", "--verify", f"{rev}^{{commit}}")
    home = cache / sha
    python = home / "venv" / "bin" / "python"
    if (home / "ready").exists():
        return str(python)
    print(f"building the reference {rev} ({sha[:10]}) in {home} ...", file=sys.stderr)
    src = home / "src"
    src.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "archive", sha], cwd=REPO, check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(home / "venv")], check=True)
    # This interpreter's packages (numpy, simpy, ...) after the reference's own: a
    # .pth line is appended to sys.path at start-up, after the venv's site-packages.
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    site = subprocess.run([str(python), "-c", purelib],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "_nightjar_bench_deps.pth").write_text(sysconfig.get_path("purelib") + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(src)],
                   check=True)
    # The installed copy must be the reference, not this tree's editable install.
    where = subprocess.run([str(python), "-c", "import nightjar; print(nightjar.__file__)"],
                           check=True, capture_output=True, text=True, cwd=home).stdout.strip()
    if not where.startswith(str(home)):
        raise SystemExit(f"the reference interpreter imports nightjar from {where}")
    (home / "ready").write_text(f"{rev} {sha}\n")
    return str(python)


def _build(r: dict[str, Any]) -> str:
    """How the side's step loop was built: mypyc's C or the Python sources."""
    return "C" if r.get("compiled") else "py"


def _row(label: str, runs: list[dict[str, Any]]) -> str:
    keys = ("wall_s", "cpu_s", "proc_s", "steps", "us_per_step", "speedup", "peak_mb")
    med = {k: statistics.median(r.get(k, float("nan")) for r in runs) for k in keys}
    return (f"{label:<22} {_build(runs[0]):>5} {med['wall_s']:>8.2f} {med['cpu_s']:>8.2f} "
            f"{med['proc_s']:>8.2f} {med['steps']:>9.0f} {med['us_per_step']:>8.1f} "
            f"{med['speedup']:>8.0f} {med['peak_mb']:>8.0f}")


def compare(sides: list[tuple[str, str]], cases: list[str], repeats: int) -> None:
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"on {os.cpu_count()} cores")
    for case in cases:
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label, _ in sides}
        for _ in range(repeats):
            for label, python in sides:  # alternating: A B A B ...
                runs[label].append(run_child(python, case))
        print(f"\n{case}: median of {repeats} alternating runs")
        print(f"{'':<22} {'build':>5} {'wall s':>8} {'cpu s':>8} {'proc s':>8} {'steps':>9} "
              f"{'us/step':>8} {'x real':>8} {'peak MB':>8}")
        for label, _ in sides:
            print(_row(label, runs[label]))
        cur = runs[sides[0][0]]
        for label, _ in sides[1:]:
            ratios = [r["wall_s"] / c["wall_s"] for r, c in zip(runs[label], cur, strict=True)]
            per_step = statistics.median(r["us_per_step"] for r in runs[label]) / statistics.median(
                c["us_per_step"] for c in cur)
            cpu = [r["cpu_s"] / c["cpu_s"] for r, c in zip(runs[label], cur, strict=True)
                   if "cpu_s" in r]
            cpu_text = f", CPU {statistics.median(cpu):.2f}x" if cpu else ""
            print(f"{label} / current: wall {statistics.median(ratios):.2f}x "
                  f"(pairs {min(ratios):.2f}-{max(ratios):.2f}), per step {per_step:.2f}x"
                  f"{cpu_text}")
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--profile-hot-loop", action="store_true",
                        help="print a cProfile of each run (to stderr)")
    parser.add_argument("--case", action="append", choices=sorted(CASES),
                        help="run only this case (repeatable; default: all)")
    parser.add_argument("--against", action="append", default=[], metavar="REV",
                        help="also time this git commit (repeatable), alternating")
    parser.add_argument("--against-python", action="append", default=[], metavar="PYTHON",
                        help="also time the nightjar installed for this interpreter")
    parser.add_argument("--repeats", type=int, default=3,
                        help="alternating runs per side with --against (default: 3)")
    parser.add_argument("--ref-cache", type=Path, help="where reference installs are kept")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.profile_hot_loop)
        return
    cases = args.case or list(CASES)
    if args.against or args.against_python:
        cache = args.ref_cache or Path(
            os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "nightjar-sim-speed"
        sides = [("current", sys.executable)]
        sides += [(rev, reference_python(rev, cache)) for rev in args.against]
        # A path runs from a neutral folder: absolute, not resolved (a venv's is a link).
        sides += [(p, os.path.abspath(p) if os.sep in p else p) for p in args.against_python]
        compare(sides, cases, args.repeats)
        return
    print(f"{'case':<20} {'build':>5} {'requests':>9} {'steps':>8} {'sim s':>8} {'wall s':>8} "
          f"{'x real':>8} {'us/step':>8} {'peak MB':>8}")
    for case in cases:
        r = run_child(sys.executable, case, args.profile_hot_loop)
        print(f"{r['case']:<20} {_build(r):>5} {r['requests']:>9} {r['steps']:>8} "
              f"{r['simulated_s']:>8.0f} "
              f"{r['wall_s']:>8.2f} {r['speedup']:>8.0f} {r['us_per_step']:>8.1f} "
              f"{r['peak_mb']:>8.0f}")


if __name__ == "__main__":
    main()
