"""The table ``nightjar schedule`` prints runs in stock vLLM (no Nightjar scheduler or
worker) on the CPU engine, and vLLM's per-step K follows it.

A batch of B copies of one request decodes in lockstep, so every step schedules B
requests and vLLM's Dynamic SD looks K up at B; vLLM's own counters (drafts and
draft tokens) then give the K it ran: draft tokens per draft.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nightjar.cli import main

PROFILE = "a100-80gb/vicuna-13b+vicuna-68m"


def _load(tmp_path: Path) -> Path:
    """A burst then a trickle: small and large batches both matter."""
    reqs = [{"arrival_s": 0.01 * i, "prompt_tokens": 100, "output_tokens": 80} for i in range(96)]
    reqs += [{"arrival_s": 2.0 + 0.5 * i, "prompt_tokens": 100, "output_tokens": 80}
             for i in range(20)]
    path = tmp_path / "load.json"
    path.write_text(json.dumps({"format_version": 1, "name": "load", "requests": reqs}))
    return path


def _k_of(table: list[list[int]], b: int) -> int:
    return next(k for lo, hi, k in table if lo <= b <= hi)


# Run in a fresh interpreter with the engine core in-process: LLM.generate then adds
# every request before the first step (with the engine core in its own process, its
# loop starts on the first requests while the rest are still arriving, and the batch
# is no longer in lockstep).
STOCK = """
import json, os, sys
os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "0"
from vllm import LLM, SamplingParams
from vllm.inputs import TokensPrompt

target, config, sizes = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
llm = LLM(model=target, dtype="float32", max_model_len=256, max_num_seqs=64,
          enforce_eager=True, gpu_memory_utilization=0.2, kv_cache_memory_bytes=48 << 20,
          enable_prefix_caching=False, disable_log_stats=False, seed=0,
          speculative_config=config)  # stock vLLM: no scheduler_cls, no worker_cls

def counts():
    m = {x.name: getattr(x, "value", 0) for x in llm.get_metrics()}
    return m["vllm:spec_decode_num_drafts"], m["vllm:spec_decode_num_draft_tokens"]

params = SamplingParams(temperature=0.0, max_tokens=12, ignore_eos=True)
ran = {}
for b in sizes:
    d0, t0 = counts()
    # One prompt for all: the same tokens accepted, so no request finishes early.
    llm.generate([TokensPrompt(prompt_token_ids=[5, 9, 11, 7] * 4)] * b, [params] * b,
                 use_tqdm=False)
    d1, t1 = counts()
    ran[b] = (t1 - t0) / (d1 - d0) if d1 > d0 else 0.0
print("RAN " + json.dumps(ran))
"""


def _run_stock_vllm(tiny: Any, config: dict[str, Any], sizes: list[int],
                    tmp_path: Path) -> dict[int, float]:
    argv = [sys.executable, "-c", STOCK, str(tiny.target), json.dumps(config),
            json.dumps(sizes)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False,
                          cwd=tmp_path)
    line = next((x for x in done.stdout.splitlines() if x.startswith("RAN ")), None)
    assert line is not None, done.stderr[-3000:]
    return {int(k): float(v) for k, v in json.loads(line[4:]).items()}


def test_stock_vllm_follows_the_tuned_table(
    tiny: Any, make_llm: Any, tmp_path: Path, capsys: Any
) -> None:
    argv = ["schedule", "--profile", PROFILE, "--trace", str(_load(tmp_path)), "--buckets",
            "1,4,16,64", "--passes", "1", "--seeds", "1", "--quiet", "--speculative-config",
            json.dumps({"method": "draft_model", "model": str(tiny.draft)})]
    assert main(argv) == 0
    config = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    table = config["num_speculative_tokens_per_batch_size"]
    sizes = [lo for lo, _, _ in table if lo <= 64]  # each range's first batch size
    assert len({_k_of(table, b) for b in sizes}) >= 2, table  # the load needs two Ks

    ran = _run_stock_vllm(tiny, config, sizes, tmp_path)
    assert ran == {b: pytest.approx(_k_of(table, b)) for b in sizes}, (table, ran)
