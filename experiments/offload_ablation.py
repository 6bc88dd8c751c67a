"""The paper's ablation: the same policy with and without elastic draft memory.

    python experiments/offload_ablation.py [--profile P] [--policy nightjar+] [TRACE ...]

Prints, per trace, KV capacity, concurrency, preemptions, TTFT, throughput and the
offload/reload counts with ``--offload off`` and ``on``, and the relative change.
"""

from __future__ import annotations

import argparse

from nightjar.profile.profile import load_profile
from nightjar.results.metrics import summarize

# Recorded with the draft skipped at gamma 0 (the default then; see policy_table.py).
from nightjar.sim import DraftKVMode, SimConfig, simulate
from nightjar.trace.trace import load_trace

RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="*", default=["burst", "steady_high", "oscillation",
                                                       "steady_low"])
    parser.add_argument("--profile", default=RTX)
    parser.add_argument("--policy", action="append", dest="policies")
    args = parser.parse_args()
    profile = load_profile(args.profile)
    m = profile.memory
    print(f"{profile.name}: {m.kv_blocks(True)} KV blocks with the draft, "
          f"{m.kv_blocks(False)} without (the draft stands for {m.draft_blocks}); "
          f"one transfer {1e3 * m.draft_weight_bytes / m.host_link_bytes_per_s:.0f} ms")
    head = (f"{'trace':<12} {'policy':<10} {'offload':<7} {'max cap':>7} {'mean B':>6} "
            f"{'max B':>5} {'preempt':>7} {'TTFT s':>7} {'tok/s':>6} {'E2E s':>6} "
            f"{'off/rel':>7} {'t_off s':>7}")
    print(head)
    for name in args.traces:
        trace = load_trace(name)
        for policy in args.policies or ["nightjar", "nightjar+", "nospec"]:
            rows = {}
            for offload in (False, True):
                cfg = SimConfig(offload=offload, draft_kv_mode=DraftKVMode.SKIP)
                r = simulate(trace, profile, policy, cfg)
                s, st = summarize(r), r.steps_frame()
                rows[offload] = s
                print(f"{name:<12} {policy:<10} {'on' if offload else 'off':<7} "
                      f"{st['kv_total_blocks'].max():>7} {s.mean_batch_size:>6.0f} "
                      f"{st['batch_size'].max():>5} {s.preemptions:>7} {s.ttft_s.mean:>7.2f} "
                      f"{s.throughput_tok_s:>6.0f} {s.e2e_s.mean:>6.2f} "
                      f"{int(r.extra['offloads']):>3}/{int(r.extra['reloads']):<3} "
                      f"{r.extra['time_offloaded_s']:>7.0f}")
            off, on = rows[False], rows[True]
            print(f"{'':<12} {'':<10} {'change':<7} {'':>7} {'':>6} {'':>5} "
                  f"{_pct(on.preemptions, off.preemptions):>7} "
                  f"{_pct(on.ttft_s.mean, off.ttft_s.mean):>7} "
                  f"{_pct(on.throughput_tok_s, off.throughput_tok_s):>6} "
                  f"{_pct(on.e2e_s.mean, off.e2e_s.mean):>6}")


def _pct(new: float, old: float) -> str:
    return f"{100 * (new / old - 1):+.0f}%" if old else "-"


if __name__ == "__main__":
    main()
