"""``nightjar-code`` runs inside vLLM: below the gate it never chooses gamma 0."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from nightjar.live.engine_spec import EngineSpec
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log


def test_nightjar_code_speculates_below_the_gate(
    tiny: Any, make_llm: Any, run_greedy: Any, tmp_path: Path
) -> None:
    rng = random.Random(5)
    prompts = [[rng.randrange(3, 2048) for _ in range(16)] for _ in range(6)]
    log = tmp_path / "steps.jsonl"
    settings = LiveSettings(policy="nightjar-code", gamma_max=3, step_log=str(log))
    spec = EngineSpec(str(tiny.target), str(tiny.draft), settings, max_model_len=256,
                      max_num_seqs=8, kv_cache_bytes=32 << 20)
    with make_llm(spec) as llm:
        # 64 tokens each: enough decode steps (> 10) even where the six requests
        # decode together and speculation emits several tokens per step.
        run_greedy(llm, prompts, [64] * len(prompts))
    result = read_log(log)
    chosen = [c for s, c in zip(result.steps, result.chosen_gamma, strict=True)
              if s.batch_size > 0]
    assert len(chosen) > 10
    # B <= 6 is below the hard gate (B > 20), and the published prior weights never
    # explore gamma 0 there, nor is it learned from engine-forced zeros: the policy
    # asks to speculate on every decode step.
    assert all(c >= 1 for c in chosen), chosen
    assert sum(s.drafted for s in result.steps) > 0
