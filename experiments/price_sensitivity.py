"""How far a step-price error moves the simulator's end-to-end figures (issue 41).

    .venv/bin/python experiments/price_sensitivity.py \
        reports/simulator/agreement-20261203d/bench-live-spec-loses \
        reports/simulator/agreement-20261203d/profile.json > OUT.md

Replays a benchmark with ``nightjar validate`` on its profile with every time in it
(decode, draft forward, prefill, mixed, wake: ``Profile.scaled``) multiplied by each
factor, and prints markdown: the simulated minus live mean E2E, mean TTFT and throughput
(% of live, mean over the rounds) per policy at each factor. Near saturation the
queue amplifies a price error: the spread across factors is the accuracy a profile
needs for the 10% target on that trace.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from nightjar.profile.profile import load_profile

FACTORS = (0.96, 0.98, 0.99, 1.0, 1.01, 1.02, 1.04)
METRICS = {"e2e_s_mean": "mean E2E", "ttft_s_mean": "mean TTFT", "throughput_tok_s": "throughput"}


def nightjar(*args: str) -> None:
    cmd = [str(Path(sys.executable).parent / "nightjar"), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"failed ({done.returncode}): {shlex.join(cmd)}\n{done.stderr}")


def errors_at(bench: Path, profile: Path, factor: float, work: Path) -> pd.DataFrame:
    """``nightjar validate``'s errors.csv for the benchmark on the profile times factor."""
    scaled = work / f"profile-x{factor}.json"
    scaled.write_text(json.dumps(load_profile(profile).scaled(factor).to_json()))
    out = work / f"validate-x{factor}"
    nightjar("validate", "--live-run", str(bench), "--profile", str(scaled),
             "--out", str(out), "--force")
    return pd.read_csv(out / "errors.csv").assign(factor=factor)


def main() -> None:
    bench, profile = Path(sys.argv[1]), Path(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        frame = pd.concat(errors_at(bench, profile, f, Path(tmp)) for f in FACTORS)
    print(f"`{bench}` on `{profile}` with every price times the factor: simulated minus "
          "live, % of live, mean over the rounds.\n")
    for metric, label in METRICS.items():
        rows = frame[frame.metric == metric].pivot(index="policy", columns="factor",
                                                  values="error_pct")
        print(f"### {label}\n")
        print("| policy | " + " | ".join(f"x{f}" for f in FACTORS) + " |")
        print("|---|" + "---|" * len(FACTORS))
        for policy, row in rows.iterrows():
            print(f"| {policy} | " + " | ".join(f"{row[f]:+.1f}" for f in FACTORS) + " |")
        print()


if __name__ == "__main__":
    main()
