"""``nightjar live --serve`` answers an OpenAI-style completion on 127.0.0.1 with the
Nightjar scheduler active, and its ``/metrics`` carries Nightjar's series next to
vLLM's."""

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

from nightjar.live.process import stop_server
from nightjar.run.config import LIVE_GAMMA_MAX

LAUNCH = (
    "import sys, nightjar.cli as c\n"
    "c.COMMANDS = c.COMMANDS if 'live' in c.COMMANDS else (*c.COMMANDS, 'live')\n"
    "sys.exit(c.main(sys.argv[1:]))\n"
)


def _metrics(port: int) -> dict[str, float]:
    """The nightjar_* samples of /metrics: bare name -> value, and labelled name -> value."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert "vllm:" in text  # vLLM's own series are still there
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("nightjar_"):
            sample, value = line.rsplit(" ", 1)
            out[sample] = out[sample.split("{")[0]] = float(value)
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
def test_serve_answers_a_completion(tiny: Any, make_llm: Any, tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "serve.log"
    argv = [
        sys.executable,
        "-c",
        LAUNCH,
        "live",
        "--serve",
        "--model",
        str(tiny.target),
        "--draft",
        str(tiny.draft),
        "--policy",
        "fixed:2",
        "--max-model-len",
        "256",
        "--kv-cache-gb",
        "0.05",
        "--port",
        str(port),
    ]
    with log.open("w") as fh:
        proc = subprocess.Popen(
            argv, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, env=dict(os.environ)
        )
    try:
        body = json.dumps(
            {"model": str(tiny.target), "prompt": "w5 w6 w7", "max_tokens": 8, "temperature": 0}
        ).encode()
        deadline = time.monotonic() + 180
        answer = None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                req = urllib.request.Request(
                    f"http://127.0.0.1:{port}/v1/completions",
                    data=body,
                    headers={"Content-Type": "application/json"},
                )
                with urllib.request.urlopen(req, timeout=30) as resp:
                    answer = json.loads(resp.read())
                break
            except OSError:
                time.sleep(2)
        assert answer is not None, log.read_text()[-2000:]
        assert answer["usage"]["completion_tokens"] == 8
        assert "NightjarScheduler" in log.read_text()
        time.sleep(0.5)  # the engine rewrites its state snapshot every 0.25 s
        m = _metrics(port)
        assert m["nightjar_gamma_max"] == LIVE_GAMMA_MAX  # --gamma-max default; fixed:2 uses 2
        assert m["nightjar_steps_total"] >= 4
        assert m["nightjar_spec_steps_total"] >= 1
        assert m["nightjar_drafted_tokens_total"] >= 2
        assert 0 < m["nightjar_accepted_tokens_total"] <= m["nightjar_drafted_tokens_total"]
        assert m["nightjar_draft_resident"] == 1
        assert m['nightjar_draft_state{policy="fixed:2",state="resident"}'] == 1
        assert m["nightjar_offloads_total"] == m["nightjar_reloads_total"] == 0
    finally:
        stop_server(proc, grace_s=30)
