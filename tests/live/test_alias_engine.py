"""The draft's weights inside the KV ballast region of a running engine (settings.alias).

On CPU the draft's linears then read their (aliased) parameters through F.linear
(docs/kernels.md). Checks: every draft parameter lies inside the KV region; the
engine's resident memory with the aliased draft is within a stated tolerance of the
same engine without any draft; greedy output equals vLLM without speculation over
two offload/reload cycles in both reload modes, with drafts accepted (a wrong weight
keeps output right but drops acceptance to ~0, measured)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from nightjar.live.engine_spec import EngineSpec
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

N_REQUESTS = 50
FORCED = {3: "offload", 10: "reload", 18: "offload", 26: "reload"}
BASE = dict(max_model_len=512, max_num_seqs=8, kv_cache_bytes=64 << 20)
# The drafter's runtime buffers and code, not its weights: the aliased engine was
# measured 13.9 MiB above the engine without a draft, a separately allocated draft
# 22.4 MiB (its 6.8 MiB of weights plus lm_head's prepacked copy on top).
RSS_TOLERANCE = 16 << 20


def _workload() -> tuple[list[list[int]], list[int]]:
    rng = random.Random(11)
    prompts = [
        [rng.randrange(3, 2048) for _ in range(rng.randrange(3, 100))] for _ in range(N_REQUESTS)
    ]
    return prompts, [rng.randrange(5, 60) for _ in range(N_REQUESTS)]


@pytest.fixture(scope="module")
def reference(tiny: Any, make_llm: Any, run_greedy: Any) -> tuple[list[list[int]], int]:
    prompts, max_tokens = _workload()
    with make_llm(EngineSpec(str(tiny.target), None, LiveSettings(gamma_max=0), **BASE)) as llm:
        run_greedy(llm, [[5, 6, 7]], [1])  # like for like: one step run, as below
        rss = llm.collective_rpc("nightjar_rss_bytes")[0]
        return run_greedy(llm, prompts, max_tokens), int(rss)


@pytest.mark.parametrize("reload", ["drain", "migrate"])
def test_aliased_draft_is_inside_kv_costs_no_memory_and_is_lossless(
    tiny: Any, make_llm: Any, run_greedy: Any, tmp_path: Path, reference: Any, reload: str
) -> None:
    want, rss_nodraft = reference
    prompts, max_tokens = _workload()
    log = tmp_path / "steps.jsonl"
    settings = LiveSettings(
        policy="cycle:3,0,2,1/3",
        gamma_max=3,
        step_log=str(log),
        draft_kv="skip",
        reload=reload,
        alias=True,  # the ballast is sized from the draft's shapes (alias_size)
        forced_residency=FORCED,
    )
    with make_llm(EngineSpec(str(tiny.target), str(tiny.draft), settings, **BASE)) as llm:
        run_greedy(llm, [[5, 6, 7]], [1])  # the worker aliases at its first step
        resident = llm.collective_rpc("nightjar_alias_report")[0]
        # Step 3 offloads; the report must come before step 10 reloads, so the
        # request stops after a few steps (24 tokens ran past the reload).
        run_greedy(llm, [[5, 6, 7]], [4])
        parked = llm.collective_rpc("nightjar_alias_report")[0]
        # Step 10 reloads on an idle pool: under the 50 requests a drain reload can
        # outlast step 18, and the controller refuses a forced offload mid-reload.
        run_greedy(llm, [[5, 6, 7]], [6])
        got = run_greedy(llm, prompts, max_tokens)
        after = llm.collective_rpc("nightjar_alias_report")[0]
        counts = llm.collective_rpc("nightjar_draft_counts")[0]
    mib = 2**20
    print(
        f"RSS MiB: no draft {rss_nodraft / mib:.1f}, aliased draft resident "
        f"{resident['rss_bytes'] / mib:.1f}, offloaded {parked['rss_bytes'] / mib:.1f}; "
        f"draft {resident['bytes'] / mib:.1f} MiB in {resident['region_blocks']} blocks, "
        f"split: {resident['split']}"
    )
    assert resident["aliased"] and resident["inside"] and not resident["parked"]
    # The region is the draft's bytes plus alignment: its large tensors were split
    # by rows (whole-tensor placement needed 16 blocks for this pair).
    share = -(-resident["bytes"] // resident["block_bytes"])
    assert resident["region_blocks"] <= share * 1.05 + 1, resident
    assert resident["split"], resident
    assert after["inside"] and not after["parked"]
    # Memory: within the tolerance of no draft at all, and the resident weights cost
    # nothing beyond the KV pool: offloading only adds their host copy.
    assert resident["rss_bytes"] - rss_nodraft < RSS_TOLERANCE
    assert parked["parked"], parked
    grown = parked["rss_bytes"] - resident["rss_bytes"]
    assert grown > 0.8 * resident["bytes"], f"offload grew RSS by {grown} bytes only"
    bad = [i for i, (a, b) in enumerate(zip(want, got, strict=True)) if a != b]
    assert not bad, f"outputs differ for requests {bad}"
    assert counts["failed"] == 0
    contents = read_log(log)
    steps = [s for s in contents.steps if s.batch_size > 0]
    done = [e["event"] for e in contents.events if e["event"].endswith("_done")]
    cycles = ["offload_done", "reload_done", "offload_done", "reload_done"]
    assert done == cycles, f"{done} in {len(contents.steps)} steps"
    # Drafts were accepted after the last reload: the aliased weights are right.
    last_reload = max(i for i, s in enumerate(steps) if s.draft_state != "offloaded")
    assert sum(s.accepted for s in steps[: last_reload + 1]) > 0
    reloaded = [s for s in steps if s.gamma > 0]
    print(
        f"accepted {sum(s.accepted for s in reloaded)} of "
        f"{sum(s.drafted for s in reloaded)} drafted tokens ({reload})"
    )
    assert sum(s.accepted for s in reloaded) > 0.1 * sum(s.drafted for s in reloaded)
