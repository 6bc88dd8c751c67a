"""Golden runs, bit for bit: a fixed seed reproduces every step and every request.

``test_sim_golden.py`` holds a summary of the static policies; this file holds a
sha256 over each run's whole output (every ``StepRecord``, every ``RequestRecord``,
the run's ``extra`` but its wall time) for the adaptive policies (``nightjar``,
``nightjar+``, with and without elastic draft memory) beside static ones, and for
the engine's other paths: V0 prefill steps, per-request lengths, opt-outs, the skip
draft-KV mode, positional acceptance, a migrating reload, a lookahead cut in a tiny
pool, a measured mixed-step table, a wake table, a lookup drafter. A refactor of
the step loop must leave every digest as it is; so must the compiled build.

After an intended change to the simulator, regenerate with
``NIGHTJAR_REGEN_GOLDEN=1 pytest tests/test_sim_golden_digest.py`` and say why in the
commit.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nightjar.core.records import RunResult
from nightjar.profile.profile import DEFAULT_PROFILE, Profile, load_profile
from nightjar.roofline.costs import build_profile
from nightjar.sim import (
    AcceptanceModel,
    DraftKVMode,
    ReloadMode,
    SchedulerMode,
    SimConfig,
    simulate,
)
from nightjar.trace.trace import Trace, load_trace
from tests.cycling import cycling_trace
from tests.pools import with_kv_blocks

GOLDEN = Path(__file__).parent / "golden" / "sim_digest.json"
RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"
A100 = DEFAULT_PROFILE


def _edited(name: str, **tables: Any) -> Profile:
    data = load_profile(A100).to_json()
    data.update(tables)
    return Profile.from_json(data, name)


def _tiny_pool(blocks: int) -> Profile:
    """The default profile with a KV pool of ``blocks`` blocks beside its draft."""
    return with_kv_blocks(load_profile(A100), blocks, "tiny-pool")


@cache
def _profile(name: str) -> Profile:
    if name == "mixed+wake":
        # [batch, prompt tokens, added ms] and [idle s, added ms], as in
        # tests/test_mixed_steps.py and tests/test_profile_wake.py.
        return _edited(name, mixed=[[1, 256, 100.0], [1, 1024, 400.0], [32, 256, 200.0],
                                    [32, 1024, 800.0]],
                       wake=[[0.5, 0.0], [1.0, 60.0], [2.0, 100.0]])
    if name == "tiny-pool":
        return _tiny_pool(40)
    if name in ("ngram", "eagle3"):
        return Profile.from_json(build_profile("h100-80gb", "llama-3.1-8b", None, "golden",
                                               drafter=name), name)
    return load_profile(name)


def _small(n: int, rate: float, out: int, seed: int = 0) -> Trace:
    rng = np.random.default_rng(seed)
    return Trace(
        name="small", seed=seed, arrival_s=np.cumsum(rng.exponential(1.0 / rate, n)),
        prompt_tokens=rng.integers(8, 200, n), output_tokens=rng.integers(1, out, n),
        workload=np.array(["sharegpt"] * n, dtype=object), acceptance=np.full(n, np.nan),
        prompts=None,
    )


def _one_at_a_time() -> Trace:
    """Lone requests that end a token or two short of a 40-block pool (640 tokens): the
    last steps of each cannot hold ``gamma + 1`` more, so its lookahead is cut."""
    rng = np.random.default_rng(1)
    n = 12
    prompt = rng.integers(515, 526, n)
    return Trace(
        name="lone", seed=1, arrival_s=10.0 * np.arange(1, n + 1), prompt_tokens=prompt,
        output_tokens=640 - prompt - rng.integers(0, 3, n),
        workload=np.array(["sharegpt"] * n, dtype=object), acceptance=np.full(n, np.nan),
        prompts=None,
    )


def _opted_out(name: str) -> Trace:
    """A bundled trace with every third request opting out of speculation."""
    trace = load_trace(name)
    return dataclasses.replace(trace, speculate=np.arange(len(trace)) % 3 != 0)


@cache
def _trace(name: str) -> Trace:
    if name == "cycles":
        return cycling_trace()
    if name == "lone":
        return _one_at_a_time()
    if name == "small-tight":
        return _small(40, 50.0, 120, seed=2)
    if name.endswith("+opt-out"):
        return _opted_out(name.removesuffix("+opt-out"))
    return load_trace(name)


SKIP = DraftKVMode.SKIP
# The memory controller allowed to move the draft after a second in one state.
DWELL = dataclasses.replace(SimConfig().memory, min_dwell_s=1.0)
# name -> (trace, profile, policy, knobs): every run seed 42.
CASES: dict[str, tuple[str, str, str, dict[str, Any]]] = {
    "static/burst": ("burst", RTX, "fixed:3", {}),
    "schedule/burst/skip": ("burst", RTX, "schedule:1-24:3,25-:0", {"draft_kv_mode": SKIP}),
    "nospec/alpaca-burst": ("alpaca-burst", RTX, "nospec", {}),
    "schedule/steady_low": ("steady_low", A100, "schedule:1-16:3,17-64:1,65-:0", {}),
    "nightjar/burst": ("burst", RTX, "nightjar", {}),
    "nightjar/burst/offload": ("burst", RTX, "nightjar", {"offload": True}),
    "nightjar/steady_low/skip+positional": (
        "steady_low", A100, "nightjar",
        {"draft_kv_mode": SKIP, "acceptance_model": AcceptanceModel.POSITIONAL}),
    "nightjar+/burst": ("burst", RTX, "nightjar+", {}),
    "nightjar+/burst/offload": ("burst", RTX, "nightjar+", {"offload": True}),
    "nightjar+/cycles/offload": ("cycles", RTX, "nightjar+", {"offload": True, "memory": DWELL}),
    "nightjar+/cycles/offload+migrate": (
        "cycles", RTX, "nightjar+",
        {"offload": True, "memory": DWELL, "reload_mode": ReloadMode.MIGRATE}),
    "schedule/cycles/offload+skip": (
        "cycles", RTX, "schedule:1-24:3,25-:0",
        {"offload": True, "memory": DWELL, "draft_kv_mode": SKIP}),
    "nightjar/cycles/offload+migrate": (
        "cycles", RTX, "nightjar",
        {"offload": True, "memory": DWELL, "reload_mode": ReloadMode.MIGRATE}),
    "nightjar+/alpaca-burst": ("alpaca-burst", RTX, "nightjar+", {}),
    "nightjar+/steady_low/v0": ("steady_low", A100, "nightjar+", {"engine": SchedulerMode.V0}),
    "nightjar+/burst/v0+offload": (
        "burst", RTX, "nightjar+", {"engine": SchedulerMode.V0, "offload": True}),
    "static/alpaca-burst/v0": ("alpaca-burst", RTX, "fixed:3", {"engine": SchedulerMode.V0}),
    "nightjar+/alpaca-burst/opt-out": ("alpaca-burst+opt-out", RTX, "nightjar+", {}),
    "tetris/steady_low": ("steady_low", A100, "tetris", {}),
    "tetris/alpaca-burst/opt-out": ("alpaca-burst+opt-out", RTX, "tetris", {}),
    "static/tiny-pool": ("small-tight", "tiny-pool", "fixed:4", {}),
    "nightjar+/tiny-pool/skip": ("small-tight", "tiny-pool", "nightjar+", {"draft_kv_mode": SKIP}),
    "static/tiny-pool/lookahead-cut": ("lone", "tiny-pool", "fixed:4", {}),
    "nightjar+/tiny-pool/lookahead-cut": ("lone", "tiny-pool", "nightjar+", {}),
    "nightjar+/steady_low/mixed+wake": ("steady_low", "mixed+wake", "nightjar+", {}),
    "nightjar/steady_low/mixed+wake/skip": (
        "steady_low", "mixed+wake", "nightjar", {"draft_kv_mode": SKIP}),
    "nightjar+/steady_low/ngram": ("steady_low", "ngram", "nightjar+", {}),
    "nightjar+/alpaca-burst/eagle3/skip": (
        "alpaca-burst", "eagle3", "nightjar+", {"draft_kv_mode": SKIP}),
}


def _token(value: Any) -> str:
    """One field, exactly: floats by their bits (numpy's and Python's alike)."""
    if isinstance(value, bool | np.bool_):
        return "T" if value else "F"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return float(value).hex()
    if isinstance(value, str):
        return value
    raise TypeError(f"unexpected field {value!r} of type {type(value)}")


def digest(result: RunResult) -> dict[str, Any]:
    h = hashlib.sha256()
    for records in (result.steps, result.requests):
        for record in records:
            fields = dataclasses.fields(record)
            h.update("|".join(_token(getattr(record, f.name)) for f in fields).encode())
            h.update(b"\n")
    extra = {k: v for k, v in result.extra.items() if k != "wall_s"}
    for key in sorted(extra):
        h.update(f"{key}={_token(extra[key])}\n".encode())
    h.update(_token(result.duration_s).encode())
    # Beside the digest, a few figures a reader can compare by eye when it fails.
    return {
        "sha256": h.hexdigest(), "steps": len(result.steps),
        "duration_s": result.duration_s,
        "emitted": sum(s.emitted for s in result.steps),
        "preemptions": sum(r.preemptions for r in result.requests),
        "offloads": extra.get("offloads", 0.0), "reloads": extra.get("reloads", 0.0),
        "migrated_blocks": extra.get("migrated_blocks", 0.0),
        "clamped_steps": sum(s.clamped for s in result.steps),
        "switch_cost_steps": sum(s.switch_cost_s > 0 for s in result.steps),
    }


def run(case: str, runner: Callable[..., RunResult] = simulate) -> dict[str, Any]:
    trace, profile, policy, knobs = CASES[case]
    result = runner(_trace(trace), _profile(profile), policy, SimConfig(seed=42, **knobs))
    return digest(result)


def _golden() -> dict[str, Any]:
    out: dict[str, Any] = json.loads(GOLDEN.read_text())
    return out


def test_the_golden_file_lists_every_case() -> None:
    if os.environ.get("NIGHTJAR_REGEN_GOLDEN"):
        GOLDEN.write_text(json.dumps({c: run(c) for c in CASES}, indent=1, sort_keys=True)
                          + "\n")
        pytest.skip("golden file regenerated")
    assert sorted(_golden()) == sorted(CASES)


@pytest.mark.parametrize("case", list(CASES))
def test_a_run_reproduces_its_golden_digest(case: str) -> None:
    if os.environ.get("NIGHTJAR_REGEN_GOLDEN"):
        pytest.skip("regenerating")
    want = _golden()[case]
    assert run(case) == want, case


def test_the_cases_cover_what_they_name() -> None:
    # A case that never reaches the path it names would hold the engine to nothing there.
    golden = _golden()
    for case, values in golden.items():
        if "offload" in case:
            assert values["offloads"] >= 1 and values["reloads"] >= 1, case
        if "migrate" in case:
            assert values["migrated_blocks"] > 0, case
        if "burst" in case.split("/")[1] or "tiny-pool/skip" in case:
            assert values["preemptions"] > 0 or "alpaca" in case, case
        if "lookahead-cut" in case:
            assert values["clamped_steps"] > 0, case
        if "skip" in case:
            assert values["switch_cost_steps"] > 0, case


def test_a_run_is_the_same_whatever_kernels_the_cpu_picks() -> None:
    # One seed, one run, on every machine (CI moved from an AVX-512 Intel to an AMD
    # without it, and 19 of these digests changed): BLAS's dot summed in the order of
    # the CPU's kernel, numpy's power ran SVML or libm. OpenBLAS runs an older CPU's
    # kernels on request; the run must not notice.
    import subprocess
    import sys

    code = ("import json; from tests.test_sim_golden_digest import run; "
            "print(json.dumps([run(c)['sha256'] for c in ('static/burst', "
            "'tetris/alpaca-burst/opt-out')]))")
    seen = set()
    for core in ("Prescott", "Sandybridge", "Haswell"):
        env = {**os.environ, "OPENBLAS_CORETYPE": core}
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                              text=True, check=True, cwd=Path(__file__).parents[1])
        seen.add(done.stdout.strip())
    golden = _golden()
    assert seen == {json.dumps([golden["static/burst"]["sha256"],
                                golden["tetris/alpaca-burst/opt-out"]["sha256"]])}
