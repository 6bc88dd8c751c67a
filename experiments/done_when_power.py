"""How often would a right simulator meet "every entry within 10%" on this machine? (issue 41)

A benchmark's entry is the mean of R rounds, so even a simulator that predicts the
engine's true mean exactly misses the 10% band whenever the R live runs' mean strays
10% from it. This takes a benchmark's own run-to-run spread per policy and metric
(``runs.csv``, the noise twin left out) and draws, for a simulator off by ``--bias``%
everywhere, how often all entries land within 10%: the live means are drawn from
normals with the measured spread (rounds of one policy share a machine state, so its
five metrics move together: each policy's draws use the measured correlation between
its metrics). Prints the chance per entry and for all of them, for several round counts.
Seeded; reads files only.

    .venv/bin/python experiments/done_when_power.py AGREE/bench-live-spec-loses [--bias 0 5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

METRICS = ("throughput_tok_s", "tpot_s_mean", "ttft_s_mean", "e2e_s_mean", "mean_batch_size")


def chance(runs: pd.DataFrame, rounds: int, bias_pct: float, draws: int,
           rng: np.random.Generator) -> tuple[float, dict[str, float]]:
    """(P(all entries within 10%), per policy P(its five within 10%))."""
    every = np.ones(draws, dtype=bool)
    per_policy = {}
    for policy, rows in runs.groupby("label", sort=False):
        values = rows[list(METRICS)].to_numpy(dtype=float)
        mean = values.mean(axis=0)
        cov = np.cov(values / mean, rowvar=False)  # relative spread, one run
        # The live mean of `rounds` runs, relative to the true mean.
        live = 1.0 + rng.multivariate_normal(np.zeros(len(METRICS)), cov / rounds, draws)
        error = (1.0 + bias_pct / 100.0) / live - 1.0
        ok = (np.abs(error) <= 0.10).all(axis=1)
        per_policy[str(policy)] = float(ok.mean())
        every &= ok
    return float(every.mean()), per_policy


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bench", type=Path)
    parser.add_argument("--bias", type=float, nargs="+", default=[0.0, 5.0])
    parser.add_argument("--rounds", type=int, nargs="+", default=[5, 10, 15])
    parser.add_argument("--draws", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    try:  # a missing or malformed runs.csv is a one-line error, as the CLI's are
        runs = pd.read_csv(args.bench / "runs.csv")
        runs = runs[~runs["label"].astype(str).str.endswith("#2")][["round", "label",
                                                                     *METRICS]]
    except (OSError, ValueError, KeyError) as err:
        why = f"no column {err}" if isinstance(err, KeyError) else str(err)
        print(f"done_when_power: {args.bench / 'runs.csv'}: {why}", file=sys.stderr)
        return 2
    print(f"{args.bench}: {len(runs)} runs, {runs['round'].nunique()} rounds; a simulator "
          f"off by BIAS% on every entry (seed {args.seed}, {args.draws} draws)")
    for bias in args.bias:
        for rounds in args.rounds:
            rng = np.random.default_rng(args.seed)
            p, per = chance(runs, rounds, bias, args.draws, rng)
            each = ", ".join(f"{k} {v:.2f}" for k, v in per.items())
            print(f"  bias {bias:+.0f}%, {rounds:2d} rounds: all 25 within 10% "
                  f"p = {p:.2f} (per policy: {each})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
