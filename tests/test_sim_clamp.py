"""Issue #13 problem 3 (and #15): one clamp for every profile lookup. Contexts above
or below the table are priced at its edge by the engine, the policies and the memory
controller alike, and every such step is counted in ``context_clamped_steps``."""

import numpy as np
import pytest

from nightjar.profile.profile import Profile, load_profile
from nightjar.sim import SimConfig, simulate
from nightjar.trace.trace import Trace

RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"


def one_request(prompt: int, output: int) -> Trace:
    return Trace(
        name="long", seed=0, arrival_s=np.zeros(1), prompt_tokens=np.array([prompt]),
        output_tokens=np.array([output]), workload=np.array(["sharegpt"], dtype=object),
        acceptance=np.full(1, np.nan),
    )


@pytest.mark.parametrize("policy", ["nightjar+", "dsd", "oracle", "nightjar", "fixed:3"])
def test_a_prompt_longer_than_the_table_runs_under_every_policy(policy: str) -> None:
    # The case: prompt 40,000 on the RTX 4090 profile (contexts 0..32768), which
    # nightjar+, dsd and oracle refused with "context length 40000 outside ...".
    profile = load_profile(RTX)
    assert profile.max_context_len == 32768
    result = simulate(one_request(40_000, 6), profile, policy, SimConfig(offload=True))
    assert np.isfinite(result.requests[0].finish_s)
    decode_steps = sum(1 for s in result.steps if s.batch_size)
    assert result.extra["context_clamped_steps"] == decode_steps > 0


def test_contexts_below_a_measured_grid_are_priced_and_counted() -> None:
    # Issue #15: a profile measured on contexts 128..512 and a trace of 20-token prompts.
    data = load_profile("a100-80gb/vicuna-13b+vicuna-68m").to_json()
    data["decode"] = [r for r in data["decode"] if 128 <= r[2] <= 512]
    data["draft_forward"] = [r for r in data["draft_forward"] if 128 <= r[1] <= 512]
    profile = Profile.from_json(data, "grid128.json")
    for policy in ("nightjar+", "dsd", "oracle"):
        result = simulate(one_request(20, 30), profile, policy, SimConfig())
        assert np.isfinite(result.requests[0].finish_s)
        assert result.extra["context_clamped_steps"] > 0


def test_batches_past_a_measured_grid_run_and_are_priced_past_it() -> None:
    # Issue #21: a measured grid ends at B = 64 while the live engine runs up to 256.
    # The simulator used to cap its batch at the grid's top, so an overload served 64
    # at a time at B = 64 prices; now it keeps its own cap, as the engine does, and a
    # batch past the grid costs more than the grid's top (along its last segment).
    data = load_profile("a100-80gb/vicuna-13b+vicuna-68m").to_json()
    data["decode"] = [r for r in data["decode"] if r[0] <= 64]
    data["draft_forward"] = [r for r in data["draft_forward"] if r[0] <= 64]
    profile = Profile.from_json(data, "b64.json")
    n = 120
    trace = Trace(
        name="crowd", seed=0, arrival_s=np.zeros(n), prompt_tokens=np.full(n, 64),
        output_tokens=np.full(n, 40), workload=np.array(["sharegpt"] * n, dtype=object),
        acceptance=np.full(n, np.nan),
    )
    result = simulate(trace, profile, "fixed:2", SimConfig(max_num_seqs=100))
    big = [s for s in result.steps if s.batch_size > 64 and not s.prefill_tokens]
    assert big and max(s.batch_size for s in result.steps) == 100
    assert result.extra["context_clamped_steps"] >= len(big)
    for s in big:
        if s.drafted != 2 * s.batch_size:  # a request near its end drafts fewer
            continue
        assert s.step_time_s == pytest.approx(
            profile.step_time_s(s.batch_size, 2, s.mean_context_len), rel=1e-9)
        assert s.step_time_s > profile.step_time_s(64, 2, s.mean_context_len)
