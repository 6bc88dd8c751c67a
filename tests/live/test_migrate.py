"""Reload by migration: the draft's KV region is emptied at once by copying the blocks
of running requests out of it, and greedy output still equals vLLM without
speculation token for token."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from nightjar.live.engine_spec import EngineSpec
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

BALLAST = 20
# Step 1 admits what the resident pool holds (about 9 requests); the offload at step 2
# frees the region, whose blocks go to the front of vLLM's free queue, so the rest
# are admitted into it at step 3 with their prompts' KV. The first ones are short:
# when the reload comes, they are gone and there is room outside the region to move
# the long requests' blocks to. The second cycle frees the region again with the
# migrated sources in it.
FORCED = {2: "offload", 50: "reload", 70: "offload", 110: "reload"}
N_SHORT, N_LONG = 9, 7


def test_migrating_reload_is_lossless_and_immediate(
    tiny: Any, make_llm: Any, run_greedy: Any, tmp_path: Path
) -> None:
    rng = random.Random(5)
    prompts = [[rng.randrange(3, 2048) for _ in range(200)] for _ in range(N_SHORT + N_LONG)]
    max_tokens = [rng.randrange(15, 30) for _ in range(N_SHORT)]
    max_tokens += [rng.randrange(150, 250) for _ in range(N_LONG)]
    # About 40 blocks of 128 tokens; a request needs 2 to 4.
    base = dict(max_model_len=512, max_num_seqs=16, kv_cache_bytes=40 * 655360)
    with make_llm(EngineSpec(str(tiny.target), None, LiveSettings(gamma_max=0), **base)) as llm:
        reference = run_greedy(llm, prompts, max_tokens)

    log = tmp_path / "steps.jsonl"
    settings = LiveSettings(
        policy="fixed:2",
        gamma_max=2,
        step_log=str(log),
        ballast_blocks=BALLAST,
        reload="migrate",
        forced_residency=FORCED,
    )
    with make_llm(EngineSpec(str(tiny.target), str(tiny.draft), settings, **base)) as llm:
        got = run_greedy(llm, prompts, max_tokens)
        counts = llm.collective_rpc("nightjar_draft_counts")[0]

    mismatched = [i for i, (a, b) in enumerate(zip(reference, got, strict=True)) if a != b]
    assert not mismatched, f"outputs differ for requests {mismatched}"

    contents = read_log(log)
    events = contents.events
    done = [e["event"] for e in events if e["event"].endswith("_done")]
    assert done == ["offload_done", "reload_done", "offload_done", "reload_done"]
    pool_blocks = next(e["pool_blocks"] for e in events if e["event"] == "start")
    region = range(pool_blocks + 1 - BALLAST, pool_blocks + 1)  # + vLLM's null block 0
    migrations = [e for e in events if e["event"] == "migrate"]
    assert migrations, "no reload migrated"
    for m in migrations:
        assert m["pairs"], "a migration with no block copies"
        assert all(s in region and d not in region for s, d in m["pairs"])
    # The worker made exactly the copies the scheduler planned.
    assert counts["migrated"] == sum(len(m["pairs"]) for m in migrations)
    # A reload that migrates is sent on the step that plans the copies.
    for i, e in enumerate(events):
        if e["event"] == "migrate":
            assert events[i + 1]["event"] == "reload_start"
            assert events[i + 1]["migrated"] == len(e["pairs"])
    # The first reload found the late requests' prompts in the region and moved
    # them at once: a single "reloading" step instead of waiting for them to end.
    steps = contents.steps
    states = [s.draft_state for s in steps]
    first = states.index("reloading")
    assert events[[e["event"] for e in events].index("reload_start") - 1]["event"] == "migrate"
    assert len(migrations[0]["pairs"]) >= 4
    assert states[first + 1] == "resident"

    # Capacity follows residency exactly as with drain (tests/live/test_capacity.py).
    resident = [s for s in steps[:2] if s.draft_state == "resident"]
    offloaded = [s for s in steps if s.draft_state == "offloaded"]
    assert resident and offloaded
    assert {s.kv_total_blocks for s in offloaded} == {resident[0].kv_total_blocks + BALLAST}
    after = [s for s in steps[first + 1 :] if s.draft_state == "resident"]
    assert after and all(s.kv_total_blocks == resident[0].kv_total_blocks for s in after)
    assert sum(s.drafted for s in after) > 0


def test_reload_mode_is_checked() -> None:
    from nightjar.errors import NightjarInputError

    assert LiveSettings(reload="migrate").reload == "migrate"
    round_trip = LiveSettings.from_config(LiveSettings(reload="migrate").to_additional_config())
    assert round_trip.reload == "migrate"
    try:
        LiveSettings(reload="compact")
    except NightjarInputError as e:
        assert "drain or migrate" in str(e) and "\n" not in str(e)
    else:
        raise AssertionError("a bad reload mode was accepted")
