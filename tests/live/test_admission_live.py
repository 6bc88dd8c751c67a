"""Issue 15: the batch the live scheduler prices K at (``nightjar.core.admission.step_batch``,
the simulator's rule) is the batch vLLM then schedules, admission steps included.

Issue 24: the test drives the engine step by step (engine core in this process) and adds
the burst by step count, so what it sees does not depend on how fast the machine is: a
replay by wall-clock arrival times saw the burst miss the decode on a loaded machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BURST = 8
DECODE_STEPS_BEFORE_BURST = 4


def test_the_priced_batch_is_the_scheduled_batch(
    tiny: Any, make_llm: Any, tmp_path: Path
) -> None:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from nightjar.live.engine_spec import EngineSpec
    from nightjar.live.profiling.session import in_process_engine
    from nightjar.live.settings import LiveSettings

    log = tmp_path / "steps.jsonl"
    settings = LiveSettings(policy="fixed:2", gamma_max=2, step_log=str(log))
    spec = EngineSpec(str(tiny.target), str(tiny.draft), settings, max_model_len=256,
                      kv_cache_bytes=int(0.05 * 2**30))

    def params(n: int) -> Any:
        return SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True)

    def prompt(n: int, k: int) -> Any:
        return TokensPrompt(prompt_token_ids=[3 + (7 * k + j) % 2000 for j in range(n)])

    with in_process_engine(), make_llm(spec) as llm:
        engine = llm.llm_engine
        # One request prefills, then decodes a few steps (its output outlasts the run).
        engine.add_request("r0", prompt(16, 0), params(120))
        for _ in range(1 + DECODE_STEPS_BEFORE_BURST):
            engine.step()
        # The burst arrives at once, between two steps: the next step admits some of
        # it beside the decode (as many as the token budget and blocks allow).
        for i in range(BURST):
            engine.add_request(f"b{i}", prompt(20 + 3 * i, i + 1), params(6))
        while engine.has_unfinished_requests():
            engine.step()
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    steps = [r for r in rows if r["kind"] == "step" and r["scheduled"]]
    shown = [(r["batch_size"], r["scheduled"], r["priced_batch"]) for r in steps[:40]]
    # r0's prefill, its decodes, then the first step that took prompts again: the burst's.
    first = next(k for k, r in enumerate(steps) if r["batch_size"] and not r["prefill_tokens"])
    burst = next(r for r in steps[first:] if r["prefill_tokens"])
    assert steps[first:].index(burst) == DECODE_STEPS_BEFORE_BURST, shown
    # That step ran the decode and admitted prompts with it.
    assert burst["batch_size"] >= 1, shown
    assert burst["scheduled"] > burst["batch_size"], shown
    # Every step was priced at the batch it scheduled.
    for r in steps:
        assert r["priced_batch"] == r["scheduled"], r
