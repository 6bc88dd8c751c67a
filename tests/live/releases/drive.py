"""Drive one vLLM release's real scheduler with Nightjar's scheduler, step by step.

Run as ``python drive.py OUT.json`` with the release's ``vllm`` package first
on ``sys.path`` (tests/live/test_vllm_releases.py does this for 0.32, 0.33 and 0.34).
There is no model: the harness plays the model runner, as vLLM's own scheduler tests
do. It builds a real ``VllmConfig`` (a tiny Llama ``config.json``, ngram speculation)
and KV cache config, adds requests, and each step calls ``schedule()``, answers with
a ``ModelRunnerOutput`` shaped as that release defines it (sampled tokens that accept
a chosen number of each request's drafts), calls ``update_from_output`` and hands the
drafter's next proposals back with ``update_draft_token_ids``. It writes what it saw
and Nightjar's step log for the test to judge, one entry per scenario.

Scenarios: ``adaptive`` (a cycling K policy, one opted-out request, half the drafts
accepted), ``reject`` (every draft rejected), ``foreign-output`` (an output without
the fields of its release), ``refusals`` (the plugin classes built with settings the
release cannot honour, and Nightjar's worker built on a release it does not run on).
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

GAMMA_MAX = 3
BLOCK = 16
PROMPT = list(range(1, 33))  # 32 tokens: n-gram lookups find matches in it
CYCLE = "cycle:3,0,2,1/2"


@contextmanager
def _triton_declared() -> Iterator[None]:
    """vLLM 0.34 refuses to configure an x86 CPU platform without triton-cpu (not on
    PyPI). The scheduler runs no kernel, so while its config is built the harness
    declares Triton present (the 0.32 CPU build never asks)."""
    import vllm.triton_utils as triton_utils

    had = triton_utils.HAS_TRITON
    triton_utils.HAS_TRITON = True
    try:
        yield
    finally:
        triton_utils.HAS_TRITON = had


def _config(root: Path, nightjar: dict[str, Any], method: str) -> tuple[Any, Any]:
    import torch
    from vllm.config import (
        CacheConfig,
        ModelConfig,
        ParallelConfig,
        SchedulerConfig,
        SpeculativeConfig,
        VllmConfig,
    )
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec

    (root / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2,
        "num_hidden_layers": 2, "vocab_size": 256, "max_position_embeddings": 512,
        "torch_dtype": "float32", "rms_norm_eps": 1e-5,
    }))
    model = ModelConfig(model=str(root), skip_tokenizer_init=True, dtype="float32",
                        max_model_len=512)
    lookup = {"prompt_lookup_max": 3, "prompt_lookup_min": 1} if method == "ngram" else {
        "model": str(root)}
    spec = SpeculativeConfig(method=method, num_speculative_tokens=GAMMA_MAX,
                             target_model_config=model,
                             target_parallel_config=ParallelConfig(), **lookup)
    with _triton_declared():
        vllm_config = VllmConfig(
            model_config=model,
            scheduler_config=SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=512,
                                             max_model_len=512, is_encoder_decoder=False),
            cache_config=CacheConfig(block_size=BLOCK, gpu_memory_utilization=0.9,
                                     cache_dtype="auto", enable_prefix_caching=False),
            speculative_config=spec,
            additional_config={"nightjar": nightjar},
        )
    vllm_config.cache_config.num_gpu_blocks = 128
    kv = KVCacheConfig(num_blocks=128, kv_cache_tensors=[], kv_cache_groups=[
        KVCacheGroupSpec(["layer"], FullAttentionSpec(block_size=BLOCK, num_kv_heads=1,
                                                      head_size=1, dtype=torch.float32))
    ])
    return vllm_config, kv


def _scheduler(root: Path, nightjar: dict[str, Any], method: str = "ngram") -> Any:
    from vllm.v1.structured_output import StructuredOutputManager

    from nightjar.live.plugins.scheduler import NightjarScheduler

    vllm_config, kv = _config(root, nightjar, method)
    return NightjarScheduler(
        vllm_config=vllm_config, kv_cache_config=kv, log_stats=True,
        structured_output_manager=StructuredOutputManager(vllm_config), block_size=BLOCK,
    )


def _request(req_id: str, opt_out: bool) -> Any:
    from vllm import SamplingParams
    from vllm.v1.request import Request

    from nightjar.live.optout import NO_SPEC_KEY

    params = SamplingParams(max_tokens=24, ignore_eos=True,
                            extra_args={NO_SPEC_KEY: 1} if opt_out else None)
    return Request(request_id=req_id, prompt_token_ids=list(PROMPT), sampling_params=params,
                   pooling_params=None)


def _output(req_ids: list[str], sampled: list[list[int]]) -> Any:
    """A ``ModelRunnerOutput`` with the fields this release defines (0.34 dropped
    ``req_id_to_index``)."""
    from vllm.v1.outputs import ModelRunnerOutput

    names = {f.name for f in dataclasses.fields(ModelRunnerOutput)}
    kwargs: dict[str, Any] = {"req_ids": req_ids, "sampled_token_ids": sampled}
    if "req_id_to_index" in names:
        kwargs["req_id_to_index"] = {r: i for i, r in enumerate(req_ids)}
    for name, value in (("logprobs", None), ("prompt_logprobs_dict", {}),
                        ("pooler_output", [])):
        if name in names:
            kwargs[name] = value
    return ModelRunnerOutput(**kwargs)


def _run(scenario: str, root: Path) -> dict[str, Any]:
    from vllm.v1.outputs import DraftTokenIds

    step_log = root / "steps.jsonl"
    policy = CYCLE if scenario == "adaptive" else "fixed:3"
    sched = _scheduler(root, {"policy": policy, "gamma_max": GAMMA_MAX,
                              "step_log": str(step_log), "draft_kv": "sync"})
    opted = {"c"} if scenario == "adaptive" else set()
    for req_id in ("a", "b", "c"):
        sched.add_request(_request(req_id, req_id in opted))
    steps: list[dict[str, Any]] = []
    fed_accepted = fed_drafted = 0
    error = None
    for _ in range(40):
        if not (sched.running or sched.waiting):
            break
        out = sched.schedule()
        req_ids = list(out.num_scheduled_tokens)
        drafts = {r: list(out.scheduled_spec_decode_tokens.get(r, ())) for r in req_ids}
        # Accept the first half of each request's drafts (none with "reject").
        accepted = {r: 0 if scenario == "reject" else len(d) // 2 for r, d in drafts.items()}
        sampled = [[7] * (1 + accepted[r]) for r in req_ids]
        fed_drafted += sum(len(d) for d in drafts.values())
        fed_accepted += sum(accepted.values())
        output: Any = _output(req_ids, sampled)
        if scenario == "foreign-output":
            output = SimpleNamespace(req_ids=req_ids, sampled_token_ids=sampled)
            if "req_id_to_index" not in {f.name for f in dataclasses.fields(type(
                    _output([], [])))}:
                output.req_id_to_index = {r: i for i, r in enumerate(req_ids)}
                del output.req_ids
        try:
            sched.update_from_output(out, output)
        except Exception as err:
            error = f"{type(err).__name__}: {err}"
            break
        k = int(out.num_spec_tokens_to_schedule)
        steps.append({"k": k, "scheduled": req_ids,
                      "drafts": {r: len(d) for r, d in drafts.items()}})
        live = [r for r in req_ids if r in sched.requests]
        sched.update_draft_token_ids(DraftTokenIds(live, [[9] * k for _ in live]))
    sched.shutdown()
    rows = [json.loads(line) for line in step_log.read_text().splitlines()]
    return {"steps": steps, "fed_drafted": fed_drafted, "fed_accepted": fed_accepted,
            "error": error, "log": [r for r in rows if r.get("kind") in ("step", "request")]}


def _refusals(root: Path) -> dict[str, Any]:
    """Each refusal's one-line message (None where the plugin was built)."""
    found: dict[str, Any] = {}
    cases = {
        "offload": {"policy": "nightjar", "gamma_max": GAMMA_MAX, "draft_kv": "sync",
                    "memory": {}},
        "plain": {"policy": "nightjar", "gamma_max": GAMMA_MAX, "draft_kv": "sync"},
    }
    for name, settings in cases.items():
        try:
            _scheduler(root / name, settings, "draft_model").shutdown()
            found[name] = None
        except Exception as err:
            found[name] = f"{type(err).__name__}: {err}"
    from nightjar.live.vllm_family import running_family

    if running_family().worker:
        return found  # the live suite runs Nightjar's worker on these releases
    try:
        from nightjar.live.plugins.worker import NightjarWorker

        NightjarWorker()
        found["worker"] = None
    except Exception as err:
        found["worker"] = f"{type(err).__name__}: {err}"
    return found


SCENARIOS = ("adaptive", "reject", "foreign-output", "refusals")


def main() -> None:
    out = Path(sys.argv[1])
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm

    result: dict[str, Any] = {"vllm": str(vllm.__version__)}
    for scenario in SCENARIOS:  # one process: vLLM imports once
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            if scenario == "refusals":
                for name in ("offload", "plain"):
                    (root / name).mkdir()
                result[scenario] = _refusals(root)
            else:
                result[scenario] = _run(scenario, root)
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
