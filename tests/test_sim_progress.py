"""Issue #13, problem 1: every run ends. A request that can never fit is refused up
front (or skipped and counted); the engine's watchdog never spins at one instant;
a lone request's lookahead never makes it preempt itself forever."""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import simpy

from nightjar.cli import main
from nightjar.core.policy import PolicyEnv
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import make_policy
from nightjar.profile.profile import DEFAULT_PROFILE, Profile, load_profile
from nightjar.sim import OnUnfit, SimConfig, SimulationStalled, check_fit, simulate
from nightjar.sim.engine import Engine
from nightjar.sim.ledger import Ledger
from nightjar.trace.trace import Trace
from tests.hang import fails_after
from tests.pools import without_window


def trace_of(rows: list[tuple[float, int, int]]) -> Trace:
    n = len(rows)
    return Trace(
        name="t", seed=0,
        arrival_s=np.array([r[0] for r in rows], dtype=float),
        prompt_tokens=np.array([r[1] for r in rows], dtype=np.int64),
        output_tokens=np.array([r[2] for r in rows], dtype=np.int64),
        workload=np.full(n, "sharegpt", dtype=object), acceptance=np.full(n, np.nan),
    )


@pytest.fixture(scope="module")
def a100() -> Profile:
    return load_profile(DEFAULT_PROFILE)


@pytest.fixture(scope="module")
def three_blocks(a100: Profile) -> Profile:
    """The A100 profile with memory for exactly 3 KV blocks while the draft is resident."""
    data = a100.to_json()
    m = data["memory"]
    per_block = m["block_size"] * (m["target_kv_bytes_per_token"] + m["draft_kv_bytes_per_token"])
    m["activation_reserve_bytes"] = int(
        m["device_bytes"] * m["gpu_memory_utilization"] - m["target_weight_bytes"]
        - m["draft_weight_bytes"] - 3.5 * per_block
    )
    p = Profile.from_json(data, "three.json")
    assert p.memory.kv_blocks(True) == 3
    return p


def test_the_issue_repro_is_refused_at_once(tmp_path: Path, capsys: Any) -> None:
    big = tmp_path / "big.json"
    big.write_text('{"requests":[{"arrival_s":0,"prompt_tokens":10000000,"output_tokens":8}]}')
    with fails_after(20):
        code = main(["sim", "--trace", str(big), "--policy", "nospec", "--no-oracle",
                     "--quiet", "--out", str(tmp_path / "o1")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    # The default profile's window (vicuna-13b: 2048) refuses it before the KV pool.
    assert "1 request(s) have prompts longer than" in err and "request 0" in err
    assert not (tmp_path / "o1").exists()


def test_an_output_that_grows_past_the_cache_is_refused(three_blocks: Profile) -> None:
    # 10 + 39 tokens need 4 blocks of 16 at the last step; the pool has 3.
    with fails_after(20), pytest.raises(NightjarInputError, match="needs 4 KV blocks"):
        simulate(trace_of([(0.0, 10, 39)]), three_blocks, "nospec", SimConfig())


def test_a_three_block_profile_runs_what_fits_and_skips_the_rest(three_blocks: Profile) -> None:
    trace = trace_of([(0.0, 20, 20), (0.05, 10, 60), (0.1, 10, 5)])
    with pytest.raises(NightjarInputError, match=r"request 1 .*--on-unfit skip"):
        simulate(trace, three_blocks, "fixed:4", SimConfig())
    with fails_after(20):
        result = simulate(trace, three_blocks, "fixed:4", SimConfig(), on_unfit=OnUnfit.SKIP)
    assert [r.request_id for r in result.requests] == [0, 2]  # ids stay the trace's
    assert all(np.isfinite(r.finish_s) for r in result.requests)
    assert result.extra["rejected_requests"] == 1.0


def test_a_lone_request_speculates_only_as_far_as_the_pool_lets_it(
    three_blocks: Profile,
) -> None:
    # 10 + 38 tokens fill the 3 blocks exactly: gamma 4 lookahead at the end does not
    # fit, which used to preempt the request, re-admit it and preempt it again.
    with fails_after(20):
        result = simulate(trace_of([(0.0, 10, 38)]), three_blocks, "fixed:4", SimConfig())
    assert np.isfinite(result.requests[0].finish_s)
    assert result.requests[0].preemptions == 0
    assert max(s.gamma for s in result.steps) == 4  # it did speculate while it fitted
    cut = [s for s in result.steps if s.batch_size and s.gamma < 4]
    assert cut and all(s.clamped for s in cut)  # the policy is told it was overridden


def test_with_offload_a_prompt_that_fits_only_without_the_draft_runs(a100: Profile) -> None:
    # A pool's worth of prompt: past vicuna-13b's window, so the window is taken away.
    a100 = without_window(a100, "unwindowed.json")
    cap_with, cap_without = a100.memory.kv_blocks(True), a100.memory.kv_blocks(False)
    prompt = (cap_with + 5) * a100.memory.block_size  # fits only once the draft is out
    assert prompt + 8 <= cap_without * a100.memory.block_size
    trace = trace_of([(0.0, prompt, 8), (0.0, 100, 20)])
    with pytest.raises(NightjarInputError, match="with the draft resident"):
        simulate(trace, a100, "fixed:3", SimConfig())  # without offload it never fits
    with fails_after(30):
        result = simulate(trace, a100, "fixed:3", SimConfig(offload=True))
    assert all(np.isfinite(r.finish_s) for r in result.requests)
    assert result.extra["offloads"] >= 1


def test_the_watchdog_stops_an_engine_that_can_never_admit(three_blocks: Profile) -> None:
    # The engine alone, without the runner's up-front check: it must stop with an
    # error after a bounded stretch of simulated idle time, not spin at t = 0.
    trace = trace_of([(0.0, 500, 8)])
    env = simpy.Environment()
    ledger = Ledger(trace.arrival_s, trace.prompt_tokens, trace.output_tokens, np.full(1, 0.5))
    policy = make_policy("nospec", PolicyEnv(latency=three_blocks))
    engine = Engine(env, ledger, three_blocks, policy, SimConfig())
    env.process(engine.run())
    with fails_after(20), pytest.raises(SimulationStalled, match=r"request 0 .*500 tokens"):
        env.run()
    assert engine.stall_limit_s < env.now < engine.stall_limit_s + 1.0
    assert len(engine.steps) < 10_000  # memory bounded: one record per idle poll


def test_fit_check_counts_every_unfit_request(three_blocks: Profile) -> None:
    fit = check_fit(trace_of([(0.0, 100, 1), (0.0, 5, 5), (1.0, 60, 1)]), three_blocks,
                    SimConfig())
    assert fit.rejected.tolist() == [0, 2] and fit.kept.tolist() == [1]
    assert "1 more request(s)" in fit.message


def test_cli_skip_reports_the_rejected_requests(tmp_path: Path, capsys: Any) -> None:
    trace = tmp_path / "t.json"
    trace.write_text('{"requests":[{"arrival_s":0,"prompt_tokens":10000000,"output_tokens":8},'
                     '{"arrival_s":0.1,"prompt_tokens":100,"output_tokens":8}]}')
    out = tmp_path / "o"
    code = main(["sim", "--trace", str(trace), "--policy", "nospec", "--no-oracle", "--quiet",
                 "--no-report", "--on-unfit", "skip", "--out", str(out)])
    assert code == 0
    assert "skipping 1 request(s) that can never run" in capsys.readouterr().out
    summary = (out / "summary.csv").read_text()
    assert "rejected_requests" in summary.splitlines()[0]


def test_max_model_len_refuses_long_prompts_and_cuts_long_answers(a100: Profile) -> None:
    # vLLM refuses a prompt longer than max_model_len and stops an answer at it (with
    # at least the token the prefill samples).
    trace = trace_of([(0.0, 100, 20), (0.1, 600, 20), (0.2, 500, 20), (0.3, 512, 20)])
    cfg = SimConfig(max_model_len=512)
    with pytest.raises(NightjarInputError,
                       match=r"^1 request\(s\) have prompts longer than --max-model-len 512 "
                             r"tokens \(the first: request 1, .*prompt 600 tokens\); pass"):
        simulate(trace, a100, "nospec", cfg)
    result = simulate(trace, a100, "nospec", cfg, on_unfit=OnUnfit.SKIP)
    assert [r.request_id for r in result.requests] == [0, 2, 3]
    assert [r.output_tokens for r in result.requests] == [20, 12, 1]
    assert result.extra["rejected_requests"] == 1.0
    assert result.extra["capped_requests"] == 2.0
