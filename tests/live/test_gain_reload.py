"""The rent-or-buy reload works live: with the draft out and requests still running, the
speculation gain forgone each step (priced by a step table) adds up until it pays for
the reload, and the memory controller brings the draft back although the room-based
reload could never fire. Before the step driver the live engine never handed the
controller the gain nor the reload's cost, so this reload could not happen."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from nightjar.core.memory import MemoryConfig
from nightjar.live.engine_spec import EngineSpec
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

OFFLOAD_AT = 6  # the scheduler step that carries a forced offload
RELOAD_COST_S = 0.03


def _step_table(path: Path) -> str:
    # Speculation clearly pays at every batch: ~0.013 s gained per step at gamma 2 with
    # the agreeing draft, so the reload pays for itself within a few steps.
    table = {
        "kind": "nightjar-step-table",
        "batch_sizes": [1, 8],
        "gammas": [0, 1, 2],
        "step_s": [[0.010, 0.012], [0.011, 0.013], [0.012, 0.014]],
        "acceptance": 0.8,
    }
    path.write_text(json.dumps(table))
    return str(path)


def test_forgone_gain_triggers_a_live_reload(
    tiny: Any, make_llm: Any, run_greedy: Any, tmp_path: Path
) -> None:
    rng = random.Random(5)
    prompts = [[rng.randrange(3, 2048) for _ in range(40)] for _ in range(4)]
    max_tokens = [120] * len(prompts)
    log = tmp_path / "steps.jsonl"
    settings = LiveSettings(
        policy="fixed:2",
        gamma_max=2,
        step_log=str(log),
        ballast_blocks=4,
        # The room-based reload can never fire (k_reload and the hold are out of reach);
        # only the gain hook can bring the draft back.
        memory=MemoryConfig(min_dwell_s=0.0, k_reload=10**6, reload_hold_s=1e6, max_dwell_s=1e6),
        reload_cost_s=RELOAD_COST_S,
        profile=_step_table(tmp_path / "table.json"),
        forced_residency={OFFLOAD_AT: "offload"},
    )
    spec = EngineSpec(
        str(tiny.target), str(tiny.draft), settings, max_model_len=256, max_num_seqs=8,
        kv_cache_bytes=40 * 655360,
    )
    with make_llm(spec) as llm:
        run_greedy(llm, prompts, max_tokens)

    contents = read_log(log)
    done = [e["event"] for e in contents.events if str(e["event"]).endswith("_done")]
    assert done == ["offload_done", "reload_done"]
    assert contents.summary["gain_reloads"] == 1.0
    assert contents.summary["reloads"] == 1.0
    steps = contents.steps
    offloaded = [i for i, s in enumerate(steps) if s.draft_state == "offloaded"]
    assert offloaded
    # Speculation resumes after the reload, while the requests are still running.
    after = steps[offloaded[-1] + 1 :]
    assert sum(s.drafted for s in after if s.draft_state == "resident") > 0
