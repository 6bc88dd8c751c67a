"""Golden output: a fixed seed reproduces a committed summary exactly.

After an intended change to the simulator, regenerate with
``NIGHTJAR_REGEN_GOLDEN=1 pytest tests/test_sim_golden.py`` and review the diff.
"""

import json
import math
import os
from pathlib import Path

import pytest

from nightjar.profile.profile import load_profile
from nightjar.results.metrics import summarize
from nightjar.sim import DraftKVMode, SimConfig, simulate_many
from nightjar.trace.trace import load_trace

GOLDEN = Path(__file__).parent / "golden" / "sim_summary.json"
CASES = [
    ("steady_low", "a100-80gb/vicuna-13b+vicuna-68m"),
    ("burst", "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"),
]
POLICIES = ["nospec", "fixed:3", "schedule:1-16:3,17-64:1,65-:0"]
# The draft-KV mode is pinned: the summary was recorded under ``skip``, and the
# default became ``sync`` (what vLLM does) after it; the engine is unchanged.
CONFIG = SimConfig(seed=42, draft_kv_mode=DraftKVMode.SKIP)
KEYS = [
    "requests_finished", "duration_s", "output_tokens", "throughput_tok_s",
    "ttft_s_mean", "ttft_s_p99", "tpot_s_mean", "tpot_s_p99", "e2e_s_mean", "e2e_s_p99",
    "preemptions", "acceptance", "gamma_switches", "mean_batch_size",
]


def current() -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for trace_name, profile_name in CASES:
        trace, profile = load_trace(trace_name), load_profile(profile_name)
        for result in simulate_many(trace, profile, POLICIES, CONFIG):
            flat = summarize(result).as_dict()
            out[f"{trace_name}/{profile_name}/{result.policy}"] = {k: flat[k] for k in KEYS}
    return out


def test_summary_matches_golden() -> None:
    got = current()
    if os.environ.get("NIGHTJAR_REGEN_GOLDEN"):
        GOLDEN.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
        pytest.skip("golden file regenerated")
    want = json.loads(GOLDEN.read_text())
    assert sorted(got) == sorted(want)
    for case, values in want.items():
        for key, value in values.items():
            # Exact up to float formatting; NaN (no drafting under nospec) equals NaN.
            assert math.isclose(got[case][key], value, rel_tol=1e-9) or (
                math.isnan(value) and math.isnan(got[case][key])
            ), f"{case} {key}: {got[case][key]} != {value}"
