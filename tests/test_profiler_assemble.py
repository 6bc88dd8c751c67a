"""The measured profiler's document, from recorded measurements (no vLLM needed).

:func:`recorded_runs` lays out what the profiler's two engines record (steps, probe
timings, windows, requests, memory facts) for a small grid, with noisy step times, and
:func:`nightjar.live.profiling.profiler.assemble` turns them into the profile. The
file it makes is frozen in ``tests/golden/``: the profiler writes it with
``json.dumps(data, indent=1)``, so any change to its keys, their order, the numbers or
their types shows here. After an intended change to the measured profile, regenerate
with ``python tests/test_profiler_assemble.py``.
"""

from __future__ import annotations

import json
import random
import sys
import types
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from nightjar.core.records import StepRecord
from nightjar.live.profiling.build import EngineRun, Window
from nightjar.live.profiling.grid import ProfilePlan
from nightjar.live.profiling.session import DRAFT, NODRAFT
from nightjar.profile.profile import Profile

GOLDEN = Path(__file__).parent / "golden"
WHEN = "2026-01-02T03:04:05+0000"
VLLM = "0.0.0+recorded"


def _plan(method: str) -> ProfilePlan:
    lookup = method != "draft_model"
    return ProfilePlan(
        target="/models/tiny-target", draft=None if lookup else "/models/tiny-draft",
        target_name="tiny-target", draft_name=method if lookup else "tiny-draft",
        batch_sizes=(1, 4), gammas=(0, 1, 2), contexts=(32, 96), prefill_lengths=(16, 256),
        mixed_batch_sizes=() if lookup else (1,), mixed_tokens=() if lookup else (64, 128),
        wake_pauses=() if lookup else (0.5, 1.0), output_tokens=16, repeats=1,
        kv_cache_bytes=1 << 28, prompts=() if lookup else ("w1 w2 w3",),
        workload="synthetic", command=f"nightjar profile --model tiny ({method})",
        method=method,
    )


class _Recorder:
    """One engine's log, written step by step on one clock."""

    def __init__(self, drafted: bool, rng: random.Random) -> None:
        self.drafted, self.rng, self.now = drafted, rng, 100.0
        self.steps: list[StepRecord] = []
        self.records: list[tuple[str, float, float]] = []
        self.windows: list[Window] = []
        self.chosen: list[int] = []
        self.requests: dict[str, dict[str, int]] = {}

    def step(self, batch: int, gamma: int, base_s: float, *, prefill: int = 0,
             context: float = float("nan")) -> None:
        dur = base_s * (1.0 + 0.2 * self.rng.random())
        start = self.now
        verify = dur * (0.55 + 0.05 * self.rng.random())
        self.records.append(("verify", start + 1e-4, verify))
        if self.drafted:
            self.records.append(("draft", start + 2e-4, dur * 0.05 * (1 + gamma)))
        self.steps.append(StepRecord(start, dur, batch, 0, gamma, prefill, batch * gamma,
                                     0, batch, 0, 100, "resident",
                                     mean_context_len=context))
        self.chosen.append(gamma)
        self.now += dur + 1e-3

    def window(self, kind: str, batch: int, context: int, steps: Any, *,
               pause_s: float = 0.0, ids: tuple[str, ...] = ()) -> None:
        self.now += 0.5
        start = self.now
        steps()
        self.windows.append(Window(kind, batch, context, start, self.now, ids, pause_s))

    def run(self, facts: dict[str, Any], blocks: int) -> EngineRun:
        return EngineRun(self.drafted, self.steps, self.records, self.windows, facts, blocks,
                         self.requests, chosen=self.chosen)


def _facts(method: str) -> dict[str, Any]:
    lookup = method != "draft_model"
    return {
        "platform": "cpu", "device_name": "cpu", "cpu_model": "Recorded CPU @ 2.0GHz",
        "cpu_count": 2, "dtype": "bfloat16", "torch": "2.0.0+cpu", "block_size": 16,
        "target_kv_bytes_per_token": 12288, "draft_kv_bytes_per_token": 0 if lookup else 3072,
        "device_bytes": 1 << 28, "gpu_memory_utilization": 0.9,
        "target_weight_bytes": 25_000_000, "draft_weight_bytes": 0 if lookup else 6_000_000,
        "host_link_bytes_per_s": 1e10, "device_bandwidth_bytes_per_s": 2e10,
    }


def recorded_runs(plan: ProfilePlan, seed: int = 0) -> dict[str, EngineRun]:
    """What the two engines record for ``plan``'s grid (noisy, seeded)."""
    rng = random.Random(seed)
    nodraft, draft = _Recorder(False, rng), _Recorder(True, rng)
    for c in plan.contexts:
        for b in plan.batch_sizes:
            base = 0.004 + 0.0003 * b + 0.00002 * c

            def plain(b: int = b, base: float = base) -> None:
                for _ in range(5):
                    nodraft.step(b, 0, base)

            nodraft.window("decode", b, c, plain)

            def cycle(b: int = b, base: float = base) -> None:
                for _ in range(3):
                    for g in (*plan.gammas[1:], 0):
                        draft.step(b, g, base * (1 + 0.4 * g))

            draft.window("decode", b, c, cycle)
    for n in plan.prefill_lengths:
        for rec in (nodraft, draft):
            for _ in range(2):
                rec.window("prefill", 1, n, lambda rec=rec, n=n: rec.step(1, 0, 1e-4 * n,
                                                                          prefill=n))
    for b in plan.mixed_batch_sizes:
        for n in plan.mixed_tokens:
            def mixed(b: int = b, n: int = n) -> None:
                for k in range(6):
                    nodraft.step(b, 0, 0.005 + (2e-5 * n if k % 2 else 0.0),
                                 prefill=n if k % 2 else 0, context=40.0 + k)

            nodraft.window("mixed", b, n, mixed)
    for pause in (0.0, *plan.wake_pauses) if plan.wake_pauses else ():
        for _ in range(3):
            nodraft.window("wake", 1, plan.wake_tokens,
                           lambda p=pause: nodraft.step(1, 0, 0.006 + 0.02 * p, prefill=64),
                           pause_s=pause)
    if plan.prompts:
        ids = tuple(f"a{k}" for k in range(6))

        def accept() -> None:
            for _ in range(4):
                draft.step(4, plan.gamma_max, 0.01)

        draft.window("accept", 4, 32, accept, ids=ids)
        for k, rid in enumerate(ids):
            draft.requests[f"{rid}-0"] = {"drafted": 40, "accepted": 12 + 3 * k}
    return {NODRAFT: nodraft.run(_facts(plan.method), 900),
            DRAFT: draft.run(_facts(plan.method), 700)}


def assembled(method: str, seed: int = 0) -> str:
    """The measured profile's file for ``method``'s recorded runs, as the command writes
    it (the measurement's time stamp and vLLM's version pinned)."""
    from nightjar.live.profiling.profiler import assemble

    fake = types.ModuleType("vllm")
    fake.__version__ = VLLM  # type: ignore[attr-defined]
    plan = _plan(method)
    with mock.patch.dict(sys.modules, {"vllm": fake}), \
            mock.patch("time.strftime", return_value=WHEN):
        data = assemble(plan, recorded_runs(plan, seed))
    return json.dumps(data, indent=1) + "\n"


METHODS = ("draft_model", "ngram")


@pytest.mark.parametrize("method", METHODS)
def test_the_measured_profile_is_the_frozen_one(method: str) -> None:
    text = assembled(method)
    assert text == (GOLDEN / f"measured_{method}.json").read_text(encoding="utf-8")
    profile = Profile.from_json(json.loads(text), method)  # and the loader reads it
    assert profile.source == "measured" and profile.drafter == method
    assert profile.gammas == (0, 1, 2) and profile.batch_sizes == (1, 4)


def test_the_recorded_runs_fill_every_table() -> None:
    data = json.loads(assembled("draft_model"))
    assert {"mixed", "wake"} <= set(data) and data["acceptance"]["synthetic"]["mean"] > 0
    plain = json.loads(assembled("ngram"))
    assert not {"mixed", "wake"} & set(plain) and plain["acceptance"] == {}
    assert plain["drafter"] == "ngram" and "drafter" not in data


if __name__ == "__main__":
    for m in METHODS:
        (GOLDEN / f"measured_{m}.json").write_text(assembled(m), encoding="utf-8")
        print(f"wrote {GOLDEN / f'measured_{m}.json'}")
