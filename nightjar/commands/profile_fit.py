"""``nightjar profile --from-run RUN [RUN ...] --base PROFILE --out FILE``: a profile
fitted from runs' own step logs (:mod:`nightjar.fidelity.fit`).

A RUN is what ``nightjar live`` or ``nightjar bench live`` wrote (a folder of policy
runs, one run, or a benchmark with its rounds); simulated runs are refused, since their
steps are the base's own prices. Nothing of vLLM is needed: the steps are on disk.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from nightjar.core.records import RunResult
from nightjar.errors import NightjarInputError


def read_runs(folder: Path) -> list[RunResult]:
    """Every run ``folder`` holds: a benchmark's runs of every round, else its runs."""
    from nightjar.results.bench import is_bench, read_bench
    from nightjar.results.read import load_runs

    if is_bench(folder):
        return [r.result for r in read_bench(folder).runs]
    return load_runs(folder)


def _command(args: argparse.Namespace, out: Path) -> str:
    parts = ["nightjar", "profile", "--from-run", *map(str, args.from_run),
             "--base", str(args.base), "--out", str(out)]
    return shlex.join(parts)


def run_fit(args: argparse.Namespace) -> int:
    from nightjar.fidelity.fit_file import write_fitted
    from nightjar.profile.profile import load_profile
    from nightjar.results.outdir import check_out_file

    others = [f"--{k}" for k in ("model", "draft", "gpu") if getattr(args, k)]
    if others:
        raise NightjarInputError(f"{others[0]} does not go with --from-run: the runs say "
                                 "what ran, and --base gives the profile to correct")
    if not args.base:
        raise NightjarInputError("--from-run needs --base PROFILE: the profile whose cells "
                                 "the runs never reached stay as they are")
    if not args.out:
        raise NightjarInputError("--from-run needs --out FILE: where to write the profile")
    out = Path(args.out)
    real = check_out_file(out, args.force, inputs=[args.base, *args.from_run])
    base = load_profile(args.base)
    runs: list[RunResult] = []
    for folder in args.from_run:
        found = read_runs(Path(folder))
        simulated = [r for r in found if r.engine != "live"]
        if simulated:
            raise NightjarInputError(
                f"--from-run {folder}: {simulated[0].policy} is a simulated run; its steps "
                "are a profile's prices, not measurements (give `nightjar live` runs)")
        runs += found
    for line in write_fitted(runs, base, real, out, name=args.name,
                             command=_command(args, out),
                             sources=[str(f) for f in args.from_run]):
        print(line, file=sys.stderr if line.startswith("warning:") else sys.stdout)
    return 0
