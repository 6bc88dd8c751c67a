"""KV capacity follows draft residency: with the draft out the scheduler holds more
blocks and runs more requests at once; after it returns (drain) nothing is lost."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from nightjar.live.engine_spec import EngineSpec
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

BALLAST = 20


def test_offload_frees_withheld_blocks_and_reload_loses_nothing(
    tiny: Any, make_llm: Any, run_greedy: Any, tmp_path: Path
) -> None:
    rng = random.Random(11)
    prompts = [[rng.randrange(3, 2048) for _ in range(200)] for _ in range(40)]
    max_tokens = [rng.randrange(60, 110) for _ in prompts]
    # About 40 blocks of 128 tokens; each request needs 3, the ballast withholds 20.
    base = dict(max_model_len=512, max_num_seqs=32, kv_cache_bytes=40 * 655360)
    with make_llm(EngineSpec(str(tiny.target), None, LiveSettings(gamma_max=0), **base)) as llm:
        reference = run_greedy(llm, prompts, max_tokens)

    log = tmp_path / "steps.jsonl"
    settings = LiveSettings(
        policy="fixed:2",
        gamma_max=2,
        step_log=str(log),
        ballast_blocks=BALLAST,
        forced_residency={12: "offload", 60: "reload"},
    )
    with make_llm(EngineSpec(str(tiny.target), str(tiny.draft), settings, **base)) as llm:
        got = run_greedy(llm, prompts, max_tokens)
    assert got == reference

    contents = read_log(log)
    steps = contents.steps
    resident = [s for s in steps[:12] if s.draft_state == "resident"]
    offloaded = [s for s in steps if s.draft_state == "offloaded"]
    assert resident and offloaded
    # The scheduler's own pool grows by exactly the ballast while the draft is out.
    assert {s.kv_total_blocks for s in offloaded} == {resident[0].kv_total_blocks + BALLAST}
    assert max(s.batch_size for s in offloaded) > max(s.batch_size for s in resident)
    done = [e["event"] for e in contents.events if e["event"].endswith("_done")]
    assert done == ["offload_done", "reload_done"]
    # The reload waits for the drain (steps in "reloading" while blocks free up);
    # afterwards the ballast is back and speculation resumes.
    tail = steps[steps.index(offloaded[-1]) + 1 :]
    assert any(s.draft_state == "reloading" for s in tail)
    after = [s for s in tail if s.draft_state == "resident"][1:]
    assert after and all(s.kv_total_blocks == resident[0].kv_total_blocks for s in after)
    assert sum(s.drafted for s in after) > 0
