"""Where a profile fitted from runs prices live decode steps, batch range by batch range.

    .venv/bin/python experiments/fit_by_batch.py reports/simulator/fit-from-runs \
        reports/simulator/agreement-20261203d/profile.json live-spec-loses > OUT.md

Reads ``FIT/splits/<trace>/{odd,even}`` (the benchmark's rounds split by
``experiments/fit_from_runs.py``), fits the odd rounds on the base profile as
``nightjar profile --from-run`` does, and prints markdown: for the pure decode steps of
each batch range, speculating or not, the error of the total priced time against the
live time (priced / live - 1, %), on the base and on the fitted profile, for the rounds
fitted (odd) and the rounds held out (even).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from nightjar.commands.profile_fit import read_runs
from nightjar.core.records import RunResult
from nightjar.fidelity.compare import priced_steps
from nightjar.fidelity.fit import fit_profile, synced
from nightjar.profile.profile import Profile, load_profile

BANDS = [0, 8, 16, 32, 40, 48, 56, 1024]


def decode_steps(runs: list[RunResult], prof: Profile, **tags: str) -> pd.DataFrame:
    frames = []
    for r in runs:
        s = priced_steps(r, prof, synced(r))
        s = s[(s["kind"] == "decode") & (s["switch_cost_s"] == 0) & (s["priced_s"] > 0)]
        frames.append(s.assign(speculating=s["gamma"] > 0, **tags))
    return pd.concat(frames, ignore_index=True)


def main() -> None:
    fit_dir, base_path, trace = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    base = load_profile(base_path)
    split = {name: read_runs(fit_dir / "splits" / trace / name) for name in ("odd", "even")}
    fitted = Profile.from_json(fit_profile(split["odd"], base)[0], "fitted")
    d = pd.concat([decode_steps(runs, prof, rounds=name, profile=label)
                   for name, runs in split.items()
                   for label, prof in (("base", base), ("fitted", fitted))])
    d["B"] = pd.cut(d["batch_size"], BANDS).astype(str)
    sums = d.groupby(["speculating", "B", "rounds", "profile"], sort=False)[
        ["priced_s", "step_time_s"]].sum()
    err = (100 * (sums["priced_s"] / sums["step_time_s"] - 1)).unstack(["rounds", "profile"])
    steps = d[d["profile"] == "base"].groupby(["speculating", "B"], sort=False).size()
    cols = [("odd", "base"), ("odd", "fitted"), ("even", "base"), ("even", "fitted")]
    print(f"`{trace}`: pure decode steps, priced / live - 1 (%), odd rounds fitted\n")
    print("| speculating | B | steps (all rounds) | odd, base | odd, fitted | even, base "
          "| even, fitted |")
    print("|---|---|---|---|---|---|---|")
    for key, row in err.iterrows():
        spec, band = key if isinstance(key, tuple) else (key, "")
        cells = " | ".join(f"{row[c]:+.1f}" for c in cols)
        print(f"| {'yes' if spec else 'no'} | {band} | {steps[(spec, band)]} | {cells} |")


if __name__ == "__main__":
    main()
