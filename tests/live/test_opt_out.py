"""Per-request opt-out: a request whose ``extra_args`` carry ``nightjar_no_spec`` is
never verified speculatively while the rest of the batch speculates, and greedy
output still equals vLLM without speculation."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from nightjar.live.engine_spec import EngineSpec
from nightjar.live.optout import NO_SPEC_KEY
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

N = 8
OPTED_OUT = {1, 4}


def test_an_opted_out_request_is_never_speculated(
    tiny: Any, make_llm: Any, run_greedy: Any, tmp_path: Path
) -> None:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    rng = random.Random(3)
    prompts = [[rng.randrange(3, 2048) for _ in range(rng.randrange(5, 60))] for _ in range(N)]
    max_tokens = [rng.randrange(20, 60) for _ in range(N)]
    base = dict(max_model_len=512, max_num_seqs=16, kv_cache_bytes=64 << 20)
    with make_llm(EngineSpec(str(tiny.target), None, LiveSettings(gamma_max=0), **base)) as llm:
        reference = run_greedy(llm, prompts, max_tokens)

    log = tmp_path / "steps.jsonl"
    settings = LiveSettings(policy="fixed:3", gamma_max=3, step_log=str(log))
    params = [
        SamplingParams(temperature=0.0, max_tokens=m, ignore_eos=True,
                       extra_args={NO_SPEC_KEY: 1} if i in OPTED_OUT else None)
        for i, m in enumerate(max_tokens)
    ]
    with make_llm(EngineSpec(str(tiny.target), str(tiny.draft), settings, **base)) as llm:
        outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params,
                            use_tqdm=False)
        ids = [o.request_id for o in outs]
        got = [list(o.outputs[0].token_ids) for o in outs]

    assert got == reference
    requests = read_log(log).requests
    # The engine may suffix the ids LLM.generate reports ("0" -> "0-<hex>").
    def logged(rid: str) -> dict[str, int]:
        hits = [v for k, v in requests.items() if k == rid or k.startswith(f"{rid}-")]
        assert len(hits) == 1, f"request {rid!r} not found once in the log: {sorted(requests)}"
        return hits[0]

    drafted = {i: logged(rid)["drafted"] for i, rid in enumerate(ids)}
    assert all(drafted[i] == 0 for i in OPTED_OUT)
    assert all(drafted[i] > 0 for i in range(N) if i not in OPTED_OUT)
