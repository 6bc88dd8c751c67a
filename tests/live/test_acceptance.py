"""A draft built to agree with the target gets real acceptance; a random one does not.
Acceptance is vLLM's own count of accepted draft tokens, read from the step log."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from nightjar.live.engine_spec import EngineSpec
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log


def _acceptance(make_llm: Any, run_greedy: Any, target: Path, draft: Path, log: Path) -> float:
    rng = random.Random(3)
    prompts = [[rng.randrange(3, 2048) for _ in range(24)] for _ in range(8)]
    settings = LiveSettings(policy="fixed:3", gamma_max=3, step_log=str(log))
    spec = EngineSpec(
        str(target),
        str(draft),
        settings,
        max_model_len=256,
        max_num_seqs=8,
        kv_cache_bytes=32 << 20,
    )
    with make_llm(spec) as llm:
        run_greedy(llm, prompts, [48] * len(prompts))
    steps = read_log(log).steps
    drafted = sum(s.drafted for s in steps)
    assert drafted > 100
    return sum(s.accepted for s in steps) / drafted


def test_agreeing_draft_is_accepted_and_random_draft_is_not(
    tiny: Any, make_llm: Any, run_greedy: Any, tmp_path: Path
) -> None:
    good = _acceptance(make_llm, run_greedy, tiny.target, tiny.draft, tmp_path / "a.jsonl")
    bad = _acceptance(make_llm, run_greedy, tiny.target, tiny.draft_random, tmp_path / "b.jsonl")
    assert good > 0.3, good
    assert bad < 0.05, bad
