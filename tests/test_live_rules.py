"""The live run's rules, below the command line (nightjar/live/*.py): each checked
here without vLLM, with the one-line errors the commands print."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from nightjar.core.memory import MemoryConfig
from nightjar.core.records import StepRecord
from nightjar.errors import NightjarInputError
from nightjar.live import elastic
from nightjar.live.bench.limits import BENCH_POLICIES, bench_gamma_max, check_bench_numbers
from nightjar.live.bench.rotation import BenchPlan
from nightjar.live.binding import allowed_cores, prior_binding
from nightjar.live.drafter_setup import method_given
from nightjar.live.drafters import DrafterChoice
from nightjar.live.engine_choice import EngineChoice, EngineSizes
from nightjar.live.forced_residency import parse_forced_residency
from nightjar.live.kv_room import check_kv_room
from nightjar.live.lengths import speculation_lengths
from nightjar.live.policy_check import check_drafter_present, check_policies, speculating
from nightjar.live.rate_scale import rate_scale_of
from nightjar.live.run_files import (
    read_engine_facts,
    step_log_path,
    write_engine_facts,
    write_step_table,
)
from nightjar.live.settings import LiveSettings
from nightjar.live.step_prior import checked_prior
from nightjar.live.steplog import StepLog
from nightjar.live.trace_fit import check_token_ids, first_requests
from nightjar.trace.trace import Trace

PROFILE = "a100-80gb/vicuna-13b+vicuna-68m"  # bundled


def test_elastic_memory_is_off_by_default_and_on_with_aliasing() -> None:
    assert elastic.memory_config("auto", alias_draft=False) is None
    assert isinstance(elastic.memory_config("auto", alias_draft=True), MemoryConfig)
    assert elastic.memory_config("off", alias_draft=True) is None
    on = elastic.memory_config("on", False, thresholds={"k_offload": 5, "k_reload": None},
                               offload_on_capacity=False)
    assert on is not None and on.k_offload == 5 and not on.offload_on_capacity


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"offload": "off", "alias_draft": False, "reload": "migrate"},
     "--reload migrate needs --offload on"),
    ({"offload": "auto", "alias_draft": False, "thresholds": {"min_dwell_s": 1.0,
                                                              "k_reload": 2}},
     "--k-reload sets the memory controller: add --offload on"),  # the flags' order
    ({"offload": "off", "alias_draft": False, "reload_on_gain": False},
     "--reload-on-gain sets the memory controller"),
    ({"offload": "on", "alias_draft": False, "thresholds": {"k_offload": 0}},
     "k_offload and k_reload must be >= 1"),
])
def test_elastic_memory_refuses_settings_it_would_ignore(kwargs: dict[str, object],
                                                         needle: str) -> None:
    with pytest.raises(NightjarInputError, match=needle):
        elastic.memory_config(**kwargs)  # type: ignore[arg-type]


def test_reload_cost_and_the_drafters_that_cannot_move() -> None:
    on = MemoryConfig()
    assert elastic.reload_cost(0.5, None, on) == 0.5
    assert elastic.reload_cost(None, None, on) is None
    assert elastic.reload_cost(None, PROFILE, None) is None
    estimate = elastic.reload_cost(None, PROFILE, on)
    assert estimate is not None and estimate > 0
    with pytest.raises(NightjarInputError, match="--reload-cost-s sets the memory controller"):
        elastic.reload_cost(0.5, None, None)
    with pytest.raises(NightjarInputError, match="--reload-cost-s must be >= 0"):
        elastic.reload_cost(-1.0, None, on)
    elastic.check_offload("draft_model", "on", on, False, True, True)  # has weights
    elastic.check_offload("ngram", "auto", None, False, False, False)  # auto: nothing asked
    with pytest.raises(NightjarInputError, match="--offload on: the ngram drafter"):
        elastic.check_offload("ngram", "on", on, False, False, False)
    with pytest.raises(NightjarInputError, match="--ballast-blocks: the mtp drafter"):
        elastic.check_offload("mtp", "auto", None, False, False, True)
    with pytest.raises(NightjarInputError, match="--alias-draft needs --offload on or auto"):
        elastic.check_alias(True, None, forced=False)
    elastic.check_alias(True, None, forced=True)


def test_kv_room(tmp_path: Path) -> None:
    draft = tmp_path / "d"
    draft.mkdir()
    (draft / "model.safetensors").write_bytes(b"\0" * 2**20)
    on = MemoryConfig()
    check_kv_room(None, str(draft), on)  # vLLM sizes the pool
    check_kv_room(0.002, None, on)  # nothing speculates
    check_kv_room(0.0005, str(draft), on, ballast_blocks=4)  # counted by the scheduler
    with pytest.raises(NightjarInputError, match="fill the whole pool"):
        check_kv_room(0.0005, str(draft), on)
    check_kv_room(0.0005, str(draft), on, tensor_parallel_size=4)  # a quarter per rank
    with pytest.raises(NightjarInputError, match="--kv-cache-gb must be in"):
        check_kv_room(-1.0, None, None)


def test_forced_residency() -> None:
    assert parse_forced_residency(None) == ({}, {})
    assert parse_forced_residency("40:offload, t800:reload,") == ({40: "offload"},
                                                                  {800: "reload"})
    with pytest.raises(NightjarInputError, match="--forced-residency wants"):
        parse_forced_residency("x:offload")


def test_speculation_lengths_default_to_each_other() -> None:
    assert speculation_lengths(None, None, default=4) == (4, 4)
    assert speculation_lengths(2, None) == (2, 2)
    assert speculation_lengths(None, 5) == (5, 5)
    assert speculation_lengths(2, 5) == (2, 5)
    with pytest.raises(NightjarInputError, match="exceeds the engine's num_speculative_tokens"):
        speculation_lengths(5, 3)
    with pytest.raises(NightjarInputError, match="must be >= 0"):
        speculation_lengths(-1, None)


def test_rate_scale() -> None:
    assert rate_scale_of(None, None) == 1.0
    assert rate_scale_of(2.0, None) == 2.0
    with pytest.warns(FutureWarning, match="deprecated"):
        assert rate_scale_of(None, 4.0) == 0.25
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for rate, time, needle in ((2.0, 0.5, "not both"), (None, 0.0, "--time-scale must"),
                                   (float("inf"), None, "--rate-scale must")):
            with pytest.raises(NightjarInputError, match=needle):
                rate_scale_of(rate, time)


def _trace(n: int, prompts: list[list[int]] | None = None) -> Trace:
    return Trace(name="t", seed=0, arrival_s=np.arange(n, dtype=float),
                 prompt_tokens=np.full(n, 4), output_tokens=np.full(n, 4),
                 workload=np.array(["chat"] * n), acceptance=np.full(n, np.nan),
                 prompts=prompts, span_s=float(n + 5))  # type: ignore[arg-type]


def test_trace_fit() -> None:
    trace = _trace(3)
    assert len(first_requests(trace, 2)) == 2
    whole = first_requests(trace, 10)
    assert len(whole) == 3 and whole.span_s is None  # the replay ends at its last arrival
    with pytest.raises(NightjarInputError, match="--max-requests must be >= 1"):
        first_requests(trace, 0)
    ids = _trace(2, [[1, 2, 3, 4], [5, 6, 7, 99]])
    check_token_ids(ids, 100, "t.json")
    with pytest.raises(NightjarInputError, match="token id 99, beyond the target's"):
        check_token_ids(ids, 99, "t.json")


def test_policy_checks() -> None:
    check_policies(["nospec", "fixed:3", "nightjar"], 4)
    with pytest.raises(NightjarInputError, match="cannot run on vLLM"):
        check_policies(["tetris"], 4)
    with pytest.raises(NightjarInputError, match="give --offload instead"):
        check_policies(["fixed:3@offload=off"], 4)
    check_drafter_present(None, "draft_model", ["nospec"])
    check_drafter_present(None, "ngram", ["nightjar"])  # a lookup needs no checkpoint
    with pytest.raises(NightjarInputError, match="need a draft model"):
        check_drafter_present(None, "draft_model", ["nospec", "fixed:2"])
    assert speculating(["nospec", "fixed:2"]) and not speculating(["nospec"])


def test_method_given() -> None:
    assert not method_given(None, None)
    assert method_given({"method": "eagle"}, None) and method_given(None, "ngram")
    assert DrafterChoice().method == "draft_model"


def test_engine_choice_runs_nospec_without_its_drafter() -> None:
    sizes = EngineSizes(max_model_len=512, kv_cache_gb=0.5, tensor_parallel_size=2)
    engine = EngineChoice("t", "draft_model", "d", {"k": 1}, 3, 4, 100,
                          {"dtype": "float32", "additional_config": {"x": 1}}, sizes)
    spec = engine.spec(LiveSettings(policy="fixed:2"))
    assert spec.draft == "d" and spec.speculates and spec.spec_tokens == 4
    assert spec.kv_cache_bytes == 2**29 and spec.max_model_len == 512
    assert spec.tensor_parallel_size == 2 and spec.enforce_eager
    assert spec.engine_args["dtype"] == "float32"
    plain = engine.spec(LiveSettings(policy="nospec"))
    assert plain.draft is None and not plain.speculates
    served, flags = engine.served(LiveSettings(policy="nightjar"),
                                  ["--dtype", "float32", "--additional-config", "{}"],
                                  ["--", "--api-key", "k"])
    assert flags == ["--dtype", "float32", "--api-key", "k"]
    assert dict(served.engine_args) == {"additional_config": {"x": 1}}


def test_run_files(tmp_path: Path) -> None:
    log = step_log_path(tmp_path, 1)
    assert log.name == ".steps-1.jsonl"
    log.write_text("old\n")
    assert not step_log_path(tmp_path, 1).exists()  # each run starts a new log
    writer = StepLog(str(log))
    writer.write("event", event="start", mono=0.0, engine={"max_num_seqs": 8})
    writer.close()
    assert read_engine_facts(log) == {"max_num_seqs": 8}
    assert read_engine_facts(tmp_path / "none.jsonl") == {}
    write_engine_facts(tmp_path, {"a": 1})
    assert json.loads((tmp_path / "engine.json").read_text()) == {"a": 1}
    assert not write_step_table(tmp_path, [])  # too few steps for a table
    steps = [StepRecord(time_s=0.1 * i, step_time_s=0.01 * (1 + g) * b, batch_size=b,
                        num_waiting=0, gamma=g, prefill_tokens=0, drafted=g * b, accepted=0,
                        emitted=b, kv_used_blocks=1, kv_total_blocks=10, draft_state="resident")
             for i, (b, g) in enumerate([(b, g) for b in (1, 2) for g in (0, 1)] * 5)]
    assert write_step_table(tmp_path, steps)
    assert json.loads((tmp_path / "step_table.json").read_text())["kind"] == "nightjar-step-table"


def test_checked_prior_is_an_absolute_path_for_files(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert checked_prior(None) is None
    assert checked_prior(PROFILE) == PROFILE
    table = {"kind": "nightjar-step-table", "batch_sizes": [1], "gammas": [0],
             "step_s": [[0.01]]}
    (tmp_path / "t.json").write_text(json.dumps(table))
    monkeypatch.chdir(tmp_path)
    assert checked_prior("t.json") == str(tmp_path / "t.json")
    with pytest.raises(NightjarInputError):
        checked_prior("no-such-profile")


def test_bench_limits_and_plan() -> None:
    check_bench_numbers(1.0, 1.0, 0, 10.0, None)
    for args, needle in (((0.0, 1.0, 0, 10.0, None), "--time-scale must be > 0"),
                         ((1.0, 0.0, 0, 10.0, None), "--kv-cache-gb must be in"),
                         ((1.0, float("inf"), 0, 10.0, None), "--kv-cache-gb must be in"),
                         ((1.0, 1.0, -1, 10.0, None), "--retries must be >= 0"),
                         ((1.0, 1.0, 0, 101.0, None), "--max-foreign must be a percentage"),
                         ((1.0, 1.0, 0, 10.0, 0), "--gamma-max must be >= 1")):
        with pytest.raises(NightjarInputError, match=needle):
            check_bench_numbers(*args)  # type: ignore[arg-type]
    assert bench_gamma_max(None, None) == 4
    assert bench_gamma_max(2, PROFILE) == 2
    plan = BenchPlan.asked(None, 2, None, BENCH_POLICIES)
    assert plan.policies == BENCH_POLICIES and plan.noise_policy == "nospec"
    assert BenchPlan.asked(["fixed:2"], 2, "none", BENCH_POLICIES).noise_policy is None


def test_cores_and_the_priors_binding(tmp_path: Path) -> None:
    mine = sorted(os.sched_getaffinity(0))
    assert allowed_cores(None) == tuple(mine)
    assert allowed_cores(str(mine[0])) == (mine[0],)
    with pytest.raises(NightjarInputError, match="this process may not run on cores"):
        allowed_cores(str(max(mine) + 1))
    assert prior_binding(None) is None and prior_binding(PROFILE) is None
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"measured": {"cpu_binding": {"bind": "0-1"}}}))
    recorded = prior_binding(str(path))
    assert recorded is not None and recorded.bind == "0-1"
