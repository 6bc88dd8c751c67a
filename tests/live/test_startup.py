"""A configuration the engine cannot start with ends in one line and exit code 2.

``--ballast-blocks`` larger than the KV pool passes the CLI's checks (blocks are only
known inside vLLM), so the scheduler refuses it at start-up: the user sees its cause,
not vLLM's tracebacks. A flag vLLM does not know is refused before any engine starts.
Both through ``nightjar live --serve``; the trace replay shares the same scheduler
path and reports through ``NightjarInputError``.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

LAUNCH = (
    "import sys, nightjar.cli as c\n"
    "c.COMMANDS = c.COMMANDS if 'live' in c.COMMANDS else (*c.COMMANDS, 'live')\n"
    "sys.exit(c.main(sys.argv[1:]))\n"
)


def _serve(tiny: Any, *flags: str) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable, "-c", LAUNCH, "live", "--serve",
        "--model", str(tiny.target), "--draft", str(tiny.draft), "--policy", "fixed:2",
        "--max-model-len", "256", "--kv-cache-gb", "0.01", "--port", "1", *flags,
    ]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)


def _lines(err: str) -> list[str]:
    # vLLM prints "Triton is installed, but ..." while it is imported, before any
    # logging is configured (docs/live.md); everything else must be the one line.
    return [line for line in err.splitlines() if line.strip() and "Triton" not in line]


@pytest.mark.slow
def test_draft_footprint_beyond_the_pool_is_one_line(tiny: Any, make_llm: Any) -> None:
    done = _serve(tiny, "--offload", "on", "--ballast-blocks", "1000")
    lines = _lines(done.stderr)
    assert done.returncode == 2, done.stderr[-3000:]
    # The server's own start-up chatter (vLLM's deprecation warnings, its weight
    # loading bar) comes first, as on any --serve start; then one line, no traceback.
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert [line for line in lines if "nightjar: error" in line] == [lines[-1]]
    assert "draft footprint of 1000 KV blocks leaves no room in a pool of" in lines[-1]
    assert lines[-1].startswith("nightjar: error: the engine cannot start")
    assert "leaked" not in done.stderr


@pytest.mark.slow
def test_aliased_draft_with_too_small_a_ballast_is_one_line(tiny: Any, make_llm: Any) -> None:
    # The region the draft's shapes need is known in the scheduler, before any worker
    # places the weights: one line naming the value, exit 2.
    done = _serve(tiny, "--offload", "on", "--alias-draft", "--ballast-blocks", "2")
    lines = _lines(done.stderr)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert [line for line in lines if "nightjar: error" in line] == [lines[-1]]
    assert "--alias-draft needs a ballast of at least" in lines[-1], lines[-1]
    assert "got --ballast-blocks 2: give --ballast-blocks" in lines[-1], lines[-1]


def test_unknown_vllm_flag_is_one_line(tiny: Any, make_llm: Any) -> None:
    done = _serve(tiny, "--", "--no-such-vllm-flag")
    lines = _lines(done.stderr)
    assert done.returncode == 2, done.stderr[-3000:]
    assert lines == [
        "nightjar: error: vLLM refuses the server flags: unrecognized arguments: "
        "--no-such-vllm-flag"
    ], done.stderr[-3000:]
