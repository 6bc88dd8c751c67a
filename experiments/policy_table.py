"""The results table of docs/policies.md: every policy on the bundled dynamic traces.

    .venv/bin/python experiments/policy_table.py [--seed 0] [--curve] [--set sharegpt|alpaca|all]

For each bundled dynamic trace and each bundled profile it simulates every policy
on the same arrivals and per-request acceptance rates (``nospec`` with no draft
loaded, as a server that never speculates runs), and prints a markdown table
(output throughput, mean E2E, regret vs the bound, gain in per-token latency over
the best static run, 0 <-> >0 toggles per minute), then how ``nightjar``,
``nightjar-code`` and
``nightjar+`` compare with
the best ``fixed:G`` and with ``nospec``. ``--curve`` adds nightjar's and nightjar+'s
per-token latency over the per-step oracle's over growing prefixes of each run (does it
shrink as the trace gets longer?).
The ShareGPT set overloads both profiles (the paper's setting); the Alpaca set peaks
near the A100 profile's saturation.
"""

from __future__ import annotations

import argparse

from nightjar.core.defaults import DEFAULT_OFFLOAD
from nightjar.core.drafter import offload_enabled
from nightjar.core.records import RunResult
from nightjar.profile.profile import Profile, load_profile
from nightjar.results.alternatives import is_static
from nightjar.results.metrics import summarize
from nightjar.results.regret import regret_curve, yardsticks
from nightjar.sim import DraftKVMode, SimConfig, simulate_many
from nightjar.trace.trace import load_trace

TRACE_SETS = {
    "sharegpt": ("burst", "oscillation", "migration"),
    "alpaca": ("alpaca-burst", "alpaca-oscillation", "alpaca-migration"),
}
PROFILES = ("a100-80gb/vicuna-13b+vicuna-68m", "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b")
FIXED = ("fixed:1", "fixed:2", "fixed:3", "fixed:4")
SPECS = (
    "nospec", *FIXED, "schedule", "dsd", "banditspec", "banditspec-exp3", "sglang", "tetris",
    "nightjar", "nightjar-code", "nightjar+", "oracle",
)
OURS = ("nightjar", "nightjar-code", "nightjar+")


def config(seed: int, profile: Profile) -> SimConfig:
    # The draft skipped at gamma 0 (the default, --draft-kv skip) and elastic memory as
    # the default has it (--offload auto: on where the drafter has weights).
    return SimConfig(seed=seed, draft_kv_mode=DraftKVMode.SKIP,
                     offload=offload_enabled(DEFAULT_OFFLOAD, profile.drafter))


def _pct(a: float, b: float) -> str:
    return f"{(a / b - 1.0) * 100.0:+.1f}%"


def table(trace: str, profile: str, seed: int, curve: bool) -> None:
    prof = load_profile(profile)
    results = simulate_many(load_trace(trace), prof, SPECS, config(seed, prof))
    runs: dict[str, RunResult] = {r.policy: r for r in results}
    sums = {k: summarize(v) for k, v in runs.items()}
    oracle = runs["oracle"]
    print(f"\n### {trace} / {profile}\n")
    statics = [r for r in results if is_static(r.policy)]
    print("| policy | throughput tok/s | mean E2E s | regret vs bound % | gain vs static % "
          "| toggles/min |")
    print("|---|---:|---:|---:|---:|---:|")
    for spec in SPECS:
        s = sums[spec]
        y = yardsticks(runs[spec], statics)
        print(
            f"| {spec} | {s.throughput_tok_s:.1f} | {s.e2e_s.mean:.2f} | {y.bound_pct:.2f} "
            f"| {y.static_gain_pct:+.2f} | {s.toggles_per_min:.1f} |"
        )
    print(f"\n(static yardstick: {yardsticks(runs['oracle'], statics).static})")
    best_fixed = max(FIXED, key=lambda f: sums[f].throughput_tok_s)
    baselines = [s for s in SPECS if s not in (*OURS, "oracle")]
    best_thr = max(baselines, key=lambda f: sums[f].throughput_tok_s)
    best_e2e = min(baselines, key=lambda f: sums[f].e2e_s.mean)
    print()
    for ours in OURS:
        s = sums[ours]
        print(
            f"- {ours}: throughput {_pct(s.throughput_tok_s, sums[best_fixed].throughput_tok_s)}"
            f" vs best fixed ({best_fixed}), "
            f"{_pct(s.throughput_tok_s, sums[best_thr].throughput_tok_s)} vs best baseline "
            f"({best_thr}); mean E2E {_pct(s.e2e_s.mean, sums['nospec'].e2e_s.mean)} vs nospec, "
            f"{_pct(s.e2e_s.mean, sums[best_e2e].e2e_s.mean)} vs best baseline ({best_e2e})"
        )
    if curve:
        for ours in OURS:
            frame = regret_curve(runs[ours], oracle, points=5)
            pairs = zip(frame.time_s, frame.regret_pct, strict=True)
            pts = ", ".join(f"{t:.0f}s: {r:+.1f}%" for t, r in pairs)
            print(f"- {ours} per-token latency vs the per-step oracle over prefixes: {pts}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--curve", action="store_true")
    parser.add_argument("--set", choices=("sharegpt", "alpaca", "all"), default="all")
    args = parser.parse_args()
    names = ("sharegpt", "alpaca") if args.set == "all" else (args.set,)
    for trace in [t for n in names for t in TRACE_SETS[n]]:
        for profile in PROFILES:
            table(trace, profile, args.seed, args.curve)


if __name__ == "__main__":
    main()
