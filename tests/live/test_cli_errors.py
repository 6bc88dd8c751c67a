"""``nightjar live`` rejects bad input with one line on stderr and exit code 2,
before any engine starts. Runs without vLLM too (the version gate is tested here)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import nightjar.cli as cli

NEEDS_VLLM = False  # conftest: run these even where vllm is absent


@pytest.fixture(autouse=True)
def _live_command(monkeypatch: pytest.MonkeyPatch) -> None:
    if "live" not in cli.COMMANDS:
        monkeypatch.setattr(cli, "COMMANDS", (*cli.COMMANDS, "live"))


@pytest.fixture()
def fake_vllm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pretend the supported vLLM is installed (the checks below come before it is used)."""
    monkeypatch.setattr("nightjar.live.version.installed_vllm_version", lambda: "0.32.0")


def _model(root: Path, name: str, vocab: int) -> str:
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"vocab_size": vocab}))
    return str(d)


def _fails(capsys: Any, argv: list[str], needle: str) -> None:
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert err.startswith("nightjar: error:") and needle in err, err


def test_parser_does_not_import_vllm_or_torch() -> None:
    code = (
        "import sys, nightjar.cli as c\n"
        "c.COMMANDS = (*c.COMMANDS, 'live') if 'live' not in c.COMMANDS else c.COMMANDS\n"
        "c.build_parser().parse_args(['live', '--model', 'x'])\n"
        "print(sorted(m for m in ('vllm', 'torch') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_model(capsys: Any, fake_vllm: None) -> None:
    _fails(capsys, ["live", "--model", "no-such-model", "--trace", "x"], "unknown model")


def test_missing_hf_model_says_no_download(
    capsys: Any, fake_vllm: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    _fails(capsys, ["live", "--model", "vicuna-13b", "--trace", "x"], "does not download")


def test_draft_vocabulary_mismatch(capsys: Any, fake_vllm: None, tmp_path: Path) -> None:
    target, draft = _model(tmp_path, "t", 2048), _model(tmp_path, "d", 1024)
    _fails(capsys, ["live", "--model", target, "--draft", draft, "--trace", "x"], "vocabulary")


def test_unsupported_vllm_version(capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("nightjar.live.version.installed_vllm_version", lambda: "0.9.1")
    _fails(capsys, ["live", "--model", "x", "--trace", "x"],
           "supports vLLM 0.32.0, 0.33.0, 0.34.0 only")


def test_gamma_max_above_engine(capsys: Any, fake_vllm: None) -> None:
    _fails(
        capsys,
        ["live", "--model", "x", "--gamma-max", "5", "--spec-tokens", "3"],
        "exceeds the engine's num_speculative_tokens",
    )


def test_tetris_is_refused(capsys: Any, fake_vllm: None, tmp_path: Path) -> None:
    target, draft = _model(tmp_path, "t", 2048), _model(tmp_path, "d", 2048)
    _fails(
        capsys,
        ["live", "--model", target, "--draft", draft, "--trace", "x", "--policy", "tetris"],
        "cannot run on vLLM",
    )


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--offload", "on", "--low-water-blocks", "-1"], "low_water_blocks must be >= 0"),
        (["--offload", "on", "--k-offload", "0"], "k_offload and k_reload must be >= 1"),
        (["--offload", "on", "--min-dwell-s", "nan"], "min_dwell_s must be >= 0"),
        (["--offload", "on", "--max-dwell-s", "1", "--min-dwell-s", "2"], "below min_dwell_s"),
        (["--k-reload", "2"], "--k-reload sets the memory controller: add --offload on"),
        (["--ballast-blocks", "-3"], "--ballast-blocks must be >= 0"),
        (["--alias-draft", "--offload", "off"], "--alias-draft needs --offload on or auto"),
        (["--tensor-parallel-size", "0"], "--tensor-parallel-size must be >= 1"),
        (["--time-scale", "0"], "--time-scale must be > 0"),
        (["--rate-scale", "0"], "--rate-scale must be a finite number > 0"),
        (["--rate-scale", "2", "--time-scale", "0.5"], "not both"),
        (["--request-rate", "4", "--rate-scale", "2"], "give --request-rate or --rate-scale"),
        (["--request-rate", "-1"], "--request-rate must be a finite number"),
        (["--burstiness", "0"], "--burstiness must be in 0.001..1000"),
        (["--burstiness", "inf"], "--burstiness must be in 0.001..1000"),
        (["--profile", "no-such-profile"], "unknown profile"),
        (["--k-offload", "two"], "invalid int value"),
    ],
)
def test_bad_flags(capsys: Any, fake_vllm: None, flags: list[str], needle: str) -> None:
    argv = ["live", "--model", "x", "--trace", "x", *flags]
    if needle == "invalid int value":  # argparse's own error: one line, exit 2
        with pytest.raises(SystemExit) as exc:
            cli.main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and needle in err, err
        return
    _fails(capsys, argv, needle)


def test_bad_step_table_file(capsys: Any, fake_vllm: None, tmp_path: Path) -> None:
    table = tmp_path / "t.json"
    table.write_text('{"kind": "nightjar-step-table", "batch_sizes": [1], "step_s": [[0]]}')
    _fails(capsys, ["live", "--model", "x", "--profile", str(table)], "one positive time")


def test_serve_takes_one_policy(capsys: Any, fake_vllm: None, tmp_path: Path) -> None:
    target, draft = _model(tmp_path, "t", 2048), _model(tmp_path, "d", 2048)
    argv = ["live", "--serve", "--model", target, "--draft", draft]
    _fails(capsys, [*argv, "--policy", "nospec", "--policy", "fixed:2"], "exactly one --policy")


def test_missing_trace(capsys: Any, fake_vllm: None, tmp_path: Path) -> None:
    target, draft = _model(tmp_path, "t", 2048), _model(tmp_path, "d", 2048)
    _fails(capsys, ["live", "--model", target, "--draft", draft], "give --trace")
    trace = ["--trace", str(tmp_path / "nope.json"), "--out", str(tmp_path / "o")]
    _fails(capsys, ["live", "--model", target, "--draft", draft, *trace], "nope.json")


def test_profile_out_is_checked_before_the_run(capsys: Any, fake_vllm: None,
                                              tmp_path: Path) -> None:
    target, draft = _model(tmp_path, "t", 2048), _model(tmp_path, "d", 2048)
    trace = tmp_path / "t.json"
    trace.write_text('{"requests": [{"arrival_s": 0, "prompt_tokens": 4, "output_tokens": 2}]}')
    argv = ["live", "--model", target, "--draft", draft, "--trace", str(trace),
            "--out", str(tmp_path / "o")]
    fitted = tmp_path / "fitted.json"
    _fails(capsys, [*argv, "--profile-out", str(fitted)], "--profile-out needs --profile")
    table = tmp_path / "table.json"
    table.write_text('{"kind": "nightjar-step-table", "batch_sizes": [1], "gammas": [0, 1], '
                     '"step_s": [[0.01], [0.02]]}')
    _fails(capsys, [*argv, "--policy", "nospec", "--profile", str(table), "--profile-out",
                    str(fitted)], "to be a nightjar profile")
    fitted.write_text("mine")
    _fails(capsys, [*argv, "--profile", "a100-80gb/vicuna-13b+vicuna-68m", "--profile-out",
                    str(fitted)], "pass --force")
    _fails(capsys, [*argv, "--profile", "a100-80gb/vicuna-13b+vicuna-68m", "--profile-out",
                    str(trace), "--force"], "it is the input")
    assert fitted.read_text() == "mine" and not (tmp_path / "o").exists()


def test_draft_that_fills_the_kv_pool_is_refused_before_vllm_starts(
    capsys: Any, fake_vllm: None, tmp_path: Path
) -> None:
    target, draft = _model(tmp_path, "t", 2048), _model(tmp_path, "d", 2048)
    (Path(draft) / "model.safetensors").write_bytes(b"\0" * 3 * 2**20)  # 3 MiB of "weights"
    argv = ["live", "--serve", "--model", target, "--draft", draft, "--policy", "fixed:2"]
    _fails(capsys, [*argv, "--offload", "on", "--kv-cache-gb", "0.002"], "fill the whole pool")
    _fails(capsys, [*argv, "--kv-cache-gb", "-1"], "--kv-cache-gb must be in")


def _write(root: Path, name: str, config: dict[str, Any]) -> str:
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    return str(d)


LLAMA = {"vocab_size": 2048, "hidden_size": 256, "num_hidden_layers": 4,
         "architectures": ["LlamaForCausalLM"]}


@pytest.mark.parametrize(
    ("spec", "extra", "needle"),
    [
        # A Nightjar setting that means nothing for the method: before vLLM is asked.
        ({"method": "ngram"}, ["--offload", "on"], "ngram drafter has no weights"),
        ({"method": "suffix"}, ["--alias-draft", "--offload", "on"], "nothing to offload"),
        ({"method": "mtp"}, ["--offload", "on"], "no separate weights to offload"),
        # One setting, two spellings.
        ({"method": "ngram", "num_speculative_tokens": 3}, ["--spec-tokens", "4"],
         "--spec-tokens and --speculative-config's 'num_speculative_tokens' set the same"),
        ({"method": "draft_model", "model": "d"}, ["--draft", "e"], "set the same thing (model)"),
        ({"method": "ngram", "num_speculative_tokens_per_batch_size": [[1, 8, 2]]}, [],
         "Nightjar's policy sets K every step"),
        ({"method": "ngram", "num_speculative_tokens": 2}, ["--gamma-max", "3"],
         "exceeds the engine's num_speculative_tokens (2)"),
    ],
)
def test_bad_drafter_flags(
    capsys: Any, fake_vllm: None, tmp_path: Path, spec: dict[str, Any], extra: list[str],
    needle: str,
) -> None:
    target = _write(tmp_path, "t", LLAMA)
    argv = ["live", "--model", target, "--trace", "x", "--speculative-config", json.dumps(spec)]
    _fails(capsys, [*argv, *extra], needle)


@pytest.mark.parametrize(
    ("method", "head", "needle"),
    [
        ("eagle3", {**LLAMA, "hidden_size": 512, "architectures": ["LlamaForCausalLMEagle3"]},
         "reads hidden states 512 wide"),
        ("eagle3", {**LLAMA, "vocab_size": 1024, "architectures": ["LlamaForCausalLMEagle3"]},
         "drafter vocabulary (1024 tokens"),
        ("eagle", {**LLAMA, "num_hidden_layers": 16}, "looks like a full model"),
        ("ngram", LLAMA, "loads no model: drop its model"),
        ("mtp", None, "needs a target with MTP layers"),
        ("eagle3", None, "needs a checkpoint"),
        ("draft_model", {**LLAMA, "architectures": ["LlamaForCausalLMEagle3"]},
         "is an eagle3 head, not a draft model"),
    ],
)
def test_a_drafter_that_does_not_fit_the_target(
    capsys: Any, fake_vllm: None, tmp_path: Path, method: str, head: dict[str, Any] | None,
    needle: str,
) -> None:
    target = _write(tmp_path, "t", LLAMA)
    spec: dict[str, Any] = {"method": method}
    if head is not None:
        spec["model"] = _write(tmp_path, "h", head)
    argv = ["live", "--model", target, "--trace", "x", "--speculative-config", json.dumps(spec)]
    _fails(capsys, argv, needle)


def test_speculative_config_must_be_a_json_object(capsys: Any) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["live", "--model", "x", "--speculative-config", "[1, 2]"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "must be a JSON object" in err, err


def test_prompt_ids_beyond_the_targets_vocabulary_are_refused_before_the_engine(
    capsys: Any, fake_vllm: None, tmp_path: Path
) -> None:
    # Issue 24: without --draft, vLLM died mid-run on an out-of-vocabulary id.
    target = _model(tmp_path, "t", 100)
    trace = tmp_path / "ids.json"
    trace.write_text(json.dumps({"requests": [
        {"arrival_s": 0, "prompt_token_ids": [5, 150], "output_tokens": 3}]}))
    _fails(capsys, ["live", "--model", target, "--trace", str(trace), "--policy", "nospec"],
           "beyond the target's vocabulary (100 tokens)")


def test_synthetic_prompt_ids_come_from_the_targets_vocabulary(tmp_path: Path) -> None:
    # Issue 24: the replay drew ids from a fixed 32000 whatever the target's vocabulary.
    import numpy as np

    from nightjar.live.engine_spec import EngineSpec
    from nightjar.live.replay import ReplayOptions, prompt_vocab, synthetic_prompt
    from nightjar.live.settings import LiveSettings

    spec = EngineSpec(_model(tmp_path, "t", 2048), None, LiveSettings())
    assert prompt_vocab(spec, ReplayOptions()) == 2048
    assert prompt_vocab(spec, ReplayOptions(vocab_size=32000)) == 2048  # never beyond it
    assert prompt_vocab(spec, ReplayOptions(vocab_size=500)) == 500
    ids = synthetic_prompt(5000, prompt_vocab(spec, ReplayOptions()), np.random.default_rng(0))
    assert max(ids) < 2048 and min(ids) >= 3


@pytest.mark.parametrize(("flags", "needle"), [
    (["--draft-kv", "skip"], "skipping it is not yet supported"),
    (["--offload", "on"], "not yet supported on vLLM 0.34.0"),
])
def test_vllm_034_refuses_what_its_runner_cannot_do_before_starting(
    capsys: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, flags: list[str], needle: str
) -> None:
    monkeypatch.setattr("nightjar.live.version.installed_vllm_version", lambda: "0.34.0")
    target, draft = _model(tmp_path, "t", 2048), _model(tmp_path, "d", 2048)
    _fails(capsys, ["live", "--model", target, "--draft", draft, "--trace", "x", *flags],
           needle)
