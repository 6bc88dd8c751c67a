"""The joint gamma/residency rule against the gamma-0-only offload, over seeds.

    python experiments/joint_residency.py [--profile P] [--policy nightjar+] [--seeds 5]
                                         [--low-water-blocks N] [--gamma-max G] [TRACE ...]

Per trace, the same policy with the draft always resident (``offload off``), with
the controller's original rule (offload only after the policy chose gamma 0:
``gamma0``) and with the joint rule (``joint``: also when the step-time model says
the draft's blocks are worth more to waiting requests than speculation buys), plus
``nospec`` (no draft at all) for reference. Each row is a mean with its 95%
interval over seeds (``nightjar.results.stats``); the ``joint - gamma0`` rows are the
per-seed (paired: same trace, same acceptance draws) differences.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable

from nightjar.core.memory import MemoryConfig
from nightjar.core.records import RunResult
from nightjar.profile.profile import load_profile
from nightjar.results.metrics import Summary, summarize
from nightjar.results.stats import mean_interval
from nightjar.sim import SimConfig, simulate
from nightjar.trace.trace import load_trace

H100 = "h100-80gb/llama-3.1-8b+llama-3.2-1b"
METRICS: dict[str, Callable[[Summary, RunResult], float]] = {
    "tok/s": lambda s, r: s.throughput_tok_s,
    "TTFT s": lambda s, r: s.ttft_s.mean,
    "E2E s": lambda s, r: s.e2e_s.mean,
    "SLO %": lambda s, r: 100.0 * s.slo_attainment,
    "preempt": lambda s, r: float(s.preemptions),
    "offloads": lambda s, r: r.extra.get("offloads", 0.0),
    "joint offl": lambda s, r: r.extra.get("capacity_offloads", 0.0),
    "reloads": lambda s, r: r.extra.get("reloads", 0.0),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=["longctx-mix", "longctx-rag", "burst"])
    parser.add_argument("--profile", default=H100)
    parser.add_argument("--policy", default="nightjar+")
    parser.add_argument("--seeds", type=int, default=5)
    # The default mark (150 blocks) suits GPU pools; a pool of tens of blocks (the live
    # tiny pair's, experiments/joint_residency_live.py) needs a smaller one to reload.
    parser.add_argument("--low-water-blocks", type=int, default=MemoryConfig().low_water_blocks)
    parser.add_argument("--gamma-max", type=int, default=SimConfig().gamma_max)
    args = parser.parse_args()
    profile = load_profile(args.profile)
    water = args.low_water_blocks
    arms: dict[str, tuple[str, SimConfig]] = {
        "offload off": (args.policy, SimConfig()),
        "gamma0": (args.policy, SimConfig(offload=True, memory=MemoryConfig(
            low_water_blocks=water, offload_on_capacity=False))),
        "joint": (args.policy, SimConfig(
            offload=True, memory=MemoryConfig(low_water_blocks=water))),
        "nospec": ("nospec", SimConfig()),
    }
    print(f"{profile.name}, policy {args.policy}, seeds 0..{args.seeds - 1}, mean ± 95% CI")
    print(f"{'trace':<12} {'arm':<14} " + " ".join(f"{m:>16}" for m in METRICS))
    for name in args.traces:
        values: dict[str, dict[str, list[float]]] = {a: {m: [] for m in METRICS} for a in arms}
        base = load_trace(name).seed
        for seed in range(args.seeds):
            # As ``nightjar sim --seeds``: seed i re-draws the arrivals too.
            trace = load_trace(name, seed=base + seed)
            for arm, (policy, cfg) in arms.items():
                cfg = dataclasses.replace(cfg, seed=seed, gamma_max=args.gamma_max)
                r = simulate(trace, profile, policy, cfg)
                s = summarize(r)
                for m, f in METRICS.items():
                    values[arm][m].append(f(s, r))
        for arm in arms:
            cells = " ".join(f"{mean_interval(values[arm][m]).format('{:.2f}'):>16}"
                             for m in METRICS)
            print(f"{name:<12} {arm:<14} {cells}")
        diffs = " ".join(
            f"{mean_interval([j - g for j, g in zip(values['joint'][m], values['gamma0'][m], strict=True)]).format('{:+.2f}'):>16}"  # noqa: E501
            for m in METRICS
        )
        print(f"{name:<12} {'joint - gamma0':<14} {diffs}")


if __name__ == "__main__":
    main()
