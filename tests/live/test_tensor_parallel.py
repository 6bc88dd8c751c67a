"""Nightjar on tensor-parallel vLLM: at TP = 2 (each rank's worker runs the Nightjar
worker plugin on its own draft shard), greedy output with gamma switching and an
offload/reload cycle equals TP = 1 without speculation, token for token.

Kept small: two ranks share this machine's two cores with everything else running."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from nightjar.live.engine_spec import EngineSpec
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

N_REQUESTS = 6
FORCED = {4: "offload", 9: "reload"}


def _workload() -> tuple[list[list[int]], list[int]]:
    rng = random.Random(12)
    prompts = [
        [rng.randrange(3, 2048) for _ in range(rng.randrange(3, 40))] for _ in range(N_REQUESTS)
    ]
    return prompts, [rng.randrange(12, 30) for _ in range(N_REQUESTS)]


BASE = dict(max_model_len=256, max_num_seqs=4, kv_cache_bytes=16 << 20)


def _tp2_spec(tiny: Any, log: Path, alias: bool = False) -> EngineSpec:
    """TP = 2 with the draft, gamma cycling and one forced offload/reload cycle."""
    settings = LiveSettings(
        policy="cycle:3,0,2/2",
        gamma_max=3,
        step_log=str(log),
        draft_kv="skip",
        alias=alias,
        forced_residency=FORCED,
    )
    return EngineSpec(str(tiny.target), str(tiny.draft), settings, tensor_parallel_size=2, **BASE)


@pytest.fixture(scope="module")
def reference(tiny: Any, make_llm: Any, run_greedy: Any) -> list[list[int]]:
    """TP = 1 without speculation: the output every TP = 2 run must reproduce."""
    prompts, max_tokens = _workload()
    with make_llm(EngineSpec(str(tiny.target), None, LiveSettings(gamma_max=0), **BASE)) as llm:
        out: list[list[int]] = run_greedy(llm, prompts, max_tokens)
    return out


def test_tp2_is_lossless_with_gamma_switching_and_an_offload_cycle(
    tiny: Any, make_llm: Any, run_greedy: Any, tmp_path: Path, reference: list[list[int]]
) -> None:
    prompts, max_tokens = _workload()
    log = tmp_path / "steps.jsonl"
    with make_llm(_tp2_spec(tiny, log)) as llm:
        got = run_greedy(llm, prompts, max_tokens)
        counts = llm.collective_rpc("nightjar_draft_counts")

    mismatched = [i for i, (a, b) in enumerate(zip(reference, got, strict=True)) if a != b]
    assert not mismatched, f"outputs differ for requests {mismatched}"
    # One worker per rank, each ran its draft shard and skipped it while parked.
    assert len(counts) == 2
    assert all(c["runs"] > 0 and c["skips"] > 0 and c["failed"] == 0 for c in counts)
    contents = read_log(log)
    steps = [s for s in contents.steps if s.batch_size > 0]
    assert {s.gamma for s in steps} >= {0, 2, 3}
    assert sum(s.accepted for s in steps) > 0
    done = [e["event"] for e in contents.events if e["event"].endswith("_done")]
    assert done == ["offload_done", "reload_done"]
    assert any(s.draft_state == "offloaded" for s in steps)


@pytest.mark.slow
def test_tp2_aliased_draft_is_lossless_and_inside_each_ranks_kv(
    tiny: Any, make_llm: Any, run_greedy: Any, tmp_path: Path, reference: list[list[int]]
) -> None:
    """Each rank aliases its own draft shard into its own KV region (sized per rank)."""
    prompts, max_tokens = _workload()
    log = tmp_path / "steps.jsonl"
    with make_llm(_tp2_spec(tiny, log, alias=True)) as llm:
        run_greedy(llm, [[5, 6, 7]], [1])  # each worker aliases at its first step
        reports = llm.collective_rpc("nightjar_alias_report")
        got = run_greedy(llm, prompts, max_tokens)
        counts = llm.collective_rpc("nightjar_draft_counts")
    print(f"TP=2 alias reports: {reports}")
    assert len(reports) == 2
    assert all(r["aliased"] and r["inside"] and not r["parked"] for r in reports), reports
    mismatched = [i for i, (a, b) in enumerate(zip(reference, got, strict=True)) if a != b]
    assert not mismatched, f"outputs differ for requests {mismatched}"
    assert all(c["runs"] > 0 and c["failed"] == 0 for c in counts), counts
    contents = read_log(log)
    steps = [s for s in contents.steps if s.batch_size > 0]
    assert sum(s.accepted for s in steps) > 0.1 * sum(s.drafted for s in steps)
    done = [e["event"] for e in contents.events if e["event"].endswith("_done")]
    assert done == ["offload_done", "reload_done"]
