"""``nightjar live`` takes vLLM's engine flags as vLLM spells them: they reach the engine
(read back from the engine's own config), and a flag vLLM or Nightjar cannot take is
one line and exit 2 before any engine starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import nightjar.cli as cli


@pytest.fixture(autouse=True)
def _live_command(monkeypatch: pytest.MonkeyPatch) -> None:
    if "live" not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, "live"))


def _trace(tmp_path: Path) -> str:
    path = tmp_path / "t.json"
    reqs = [{"arrival_s": 0.0, "prompt_tokens": 12, "output_tokens": 10} for _ in range(2)]
    path.write_text(json.dumps({"format_version": 1, "name": "t", "requests": reqs}))
    return str(path)


def test_vllm_flags_reach_the_engine(tiny: Any, make_llm: Any, tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = cli.main([
        "live", "--model", str(tiny.target), "--draft", str(tiny.draft),
        "--gpu-memory-utilization", "0.5", "--max-num-batched-tokens", "1024",
        "--max_num_seqs=8", "--enable-prefix-caching",
        "--trace", _trace(tmp_path), "--policy", "fixed:2", "--max-model-len", "256",
        "--kv-cache-gb", "0.03", "--out", str(out), "--no-report", "--quiet",
    ])  # fmt: skip
    assert code == 0
    # What the scheduler read from vLLM's config inside the engine.
    engine = json.loads((out / "fixed-2" / "engine.json").read_text())
    assert engine["gpu_memory_utilization"] == 0.5
    assert engine["max_num_batched_tokens"] == 1024
    assert engine["max_num_seqs"] == 8
    assert engine["enable_prefix_caching"] is True
    assert engine["method"] == "draft_model" and engine["num_speculative_tokens"] == 4


def _fails(capsys: Any, argv: list[str], needle: str) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert err.startswith("nightjar: error:") and needle in err, err


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--no-such-vllm-flag"],
         "vLLM refuses the engine flags: unrecognized arguments: --no-such-vllm-flag"),
        (["--gpu-memory-utilization", "lots"],
         "vLLM refuses the engine flags: argument --gpu-memory-utilization"),
        (["--scheduler-cls", "my.Scheduler"], "--scheduler-cls: nightjar live runs Nightjar's"),
        (["--worker-cls", "my.Worker"], "--worker-cls: nightjar live runs Nightjar's worker"),
        (["--pipeline-parallel-size", "2"], "tensor parallelism only"),
        (["--kv-cache-memory-bytes", "1000000", "--kv-cache-gb", "1"],
         "--kv-cache-memory-bytes and --kv-cache-gb set the same thing"),
        (["--no-enforce-eager", "--compile"], "--enforce-eager and --compile set the same"),
        (["--additional-config", '{"nightjar": {"policy": "nospec"}}'], "settings channel"),
        (["--speculative-config.method", "ngram"], "give it once, as --speculative-config"),
        (["--spec-method", "bogus"], "the installed vLLM has no such method"),
        (["--spec-method", "medusa"], "Nightjar drives draft_model, eagle, eagle3"),
        (["--", "--api-key", "k"], "need --serve"),
    ],
)
def test_flags_nightjar_or_vllm_cannot_take(
    capsys: Any, tiny: Any, flags: list[str], needle: str
) -> None:
    argv = ["live", "--model", str(tiny.target), "--draft", str(tiny.draft), "--trace", "x"]
    _fails(capsys, [*argv, *flags], needle)


def _repetitive_trace(tmp_path: Path) -> str:
    """Requests whose prompts repeat a short pattern (n-gram lookups find matches)."""
    reqs = []
    for i in range(6):
        pattern = [11 + i, 12, 13, 14]
        ids = (pattern * 10)[: 24 + 2 * i]
        reqs.append({"arrival_s": 0.05 * i, "prompt_tokens": len(ids), "output_tokens": 40,
                     "prompt_token_ids": ids})
    path = tmp_path / "rep.json"
    path.write_text(json.dumps({"format_version": 1, "name": "rep", "requests": reqs}))
    return str(path)


@pytest.mark.parametrize("method", ["ngram", "eagle3"])
def test_nightjar_plus_over_a_speculative_config(
    method: str, tiny: Any, make_llm: Any, tmp_path: Path
) -> None:
    """The issue's commands: vLLM's --speculative-config, nightjar+ choosing K per step
    (losslessness of the same engine path: test_drafters.py)."""
    import pandas as pd

    spec: dict[str, Any] = {"method": method, "num_speculative_tokens": 4}
    if method == "ngram":
        spec["prompt_lookup_max"] = 3
    else:
        from nightjar.live.tiny_heads import build_eagle3

        spec["model"] = str(build_eagle3(tiny.target, tmp_path / "head"))
    out = tmp_path / "out"
    code = cli.main([
        "live", "--model", str(tiny.target), "--speculative-config", json.dumps(spec),
        "--trace", _repetitive_trace(tmp_path), "--policy", "nightjar+",
        "--max-model-len", "256", "--kv-cache-gb", "0.03", "--out", str(out), "--no-report",
        "--quiet",
    ])  # fmt: skip
    assert code == 0
    engine = json.loads((out / "nightjar+" / "engine.json").read_text())
    assert engine["method"] == method and engine["num_speculative_tokens"] == 4
    steps = pd.read_csv(out / "nightjar+" / "steps.csv")
    decode = steps[steps["batch_size"] > 0]
    assert decode["gamma"].nunique() >= 2  # K varied per step
    assert (decode["gamma"] <= 4).all()
    assert (decode["drafted"] <= decode["gamma"] * decode["batch_size"]).all()
    assert decode["drafted"].sum() > 0


def test_serve_merges_the_users_additional_config_with_nightjars(
    tiny: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """vLLM's server takes one --additional-config: the user's keys and Nightjar's
    settings channel are merged into it, not one replacing the other."""
    from nightjar.live import serve as serve_module

    seen: dict[str, Any] = {}

    def fake_serve(spec: Any, host: str, port: int, extra: list[str]) -> int:
        seen["argv"] = serve_module.server_argv(spec, host, port, extra, "state.json")
        return 0

    monkeypatch.setattr(serve_module, "serve", fake_serve)
    code = cli.main([
        "live", "--serve", "--model", str(tiny.target), "--draft", str(tiny.draft),
        "--policy", "fixed:2", "--additional-config", '{"mine": 1}', "--api-key", "k",
    ])  # fmt: skip
    assert code == 0
    argv = seen["argv"]
    assert argv.count("--additional-config") == 1
    merged = json.loads(argv[argv.index("--additional-config") + 1])
    assert merged["mine"] == 1 and merged["nightjar"]["policy"] == "fixed:2"
    assert argv[-2:] == ["--api-key", "k"]  # server flags pass through as given
