"""``nightjar profile --roofline`` on any model (config.json, HF ids) and any GPU
(--gpu-spec, H200/B200), and the vocabulary check on every pair."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nightjar import cli
from nightjar.errors import NightjarInputError
from nightjar.profile.profile import load_profile
from nightjar.roofline.costs import build_profile
from nightjar.roofline.gpu_spec import parse_gpu_spec
from nightjar.roofline.hardware import GPUS, get_gpu, get_model
from nightjar.roofline.model_config import load_model_config

# Llama-3.1-8B's published config.json keys and values (the ones the loader reads).
LLAMA_8B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 128256, "torch_dtype": "bfloat16",
    "tie_word_embeddings": False, "attention_bias": False, "head_dim": 128,
    "max_position_embeddings": 131072,
}
TINY_DRAFT = {
    "model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 688,
    "vocab_size": 128256, "torch_dtype": "bfloat16", "tie_word_embeddings": True,
}
SPEC = "name=h20,bf16_tflops=148,memory_bandwidth_gb_s=4000,memory_gib=95.6,host_link_gb_s=50"


def _write(path: Path, cfg: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg), encoding="utf-8")
    return path


def _cli(*argv: str) -> int:
    return cli.main(list(argv))


def test_config_json_matches_the_catalogue_shape(tmp_path: Path) -> None:
    m = load_model_config(str(_write(tmp_path / "Llama-3.1-8B" / "config.json", LLAMA_8B)))
    ref = get_model("llama-3.1-8b")
    assert m.name == "llama-3.1-8b"
    assert m.params == ref.params  # derived from the shape, equal to the published count
    assert m.kv_bytes_per_token == ref.kv_bytes_per_token
    assert m.max_len == ref.max_len == 131072  # the context window
    no_window = {k: v for k, v in LLAMA_8B.items() if k != "max_position_embeddings"}
    bare = _write(tmp_path / "bare" / "config.json", no_window)
    assert load_model_config(str(bare)).max_len is None
    # A directory works as well as the file.
    assert load_model_config(str(tmp_path / "Llama-3.1-8B")) == m


def test_config_round_trip_profile_and_sim(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = _write(tmp_path / "big" / "config.json", LLAMA_8B)
    draft = _write(tmp_path / "small" / "config.json", TINY_DRAFT)
    out = tmp_path / "p.json"
    assert _cli("profile", "--roofline", "--gpu-spec", SPEC, "--model-config", str(target),
                "--draft-config", str(draft), "--out", str(out)) == 0
    p = load_profile(str(out))
    assert p.name == "h20/big+small"
    assert "--model-config" in p.command and "--gpu-spec" in p.command
    assert p.memory.kv_blocks(False) > p.memory.kv_blocks(True) > 0
    assert p.memory.max_model_len == 131072  # the target's window, the config's
    capsys.readouterr()
    assert _cli("sim", "--quiet", "--no-report", "--no-oracle", "--trace", "steady_low",
                "--profile", str(out), "--policy", "nospec", "--policy", "fixed:2",
                "--out", str(tmp_path / "run")) == 0
    assert (tmp_path / "run").is_dir()


def test_hf_id_is_a_catalogue_name(tmp_path: Path) -> None:
    by_id = build_profile("h200", "meta-llama/Llama-3.1-8B-Instruct", "llama-3.2-1b", "c")
    by_name = build_profile("h200", "llama-3.1-8b", "llama-3.2-1b", "c")
    assert by_id == by_name
    out = tmp_path / "p.json"
    assert _cli("profile", "--roofline", "--gpu", "h200", "--model",
                "meta-llama/Llama-3.1-8B-Instruct", "--draft", "META-LLAMA/Llama-3.2-1B-Instruct",
                "--out", str(out)) == 0
    assert load_profile(str(out)).target == "llama-3.1-8b"


def test_h200_and_b200_catalogue() -> None:
    h200, b200, h100 = get_gpu("h200"), get_gpu("B200"), get_gpu("h100-80gb")
    assert h200.mem_bandwidth_bytes_per_s == 4.8e12 and h200.memory_bytes == 143771 << 20
    assert b200.peak_flops == 2.25e15 and b200.mem_bandwidth_bytes_per_s == 8e12
    assert {"h200", "b200"} <= set(GPUS)
    # Same compute as the H100, more bandwidth: a memory-bound step is faster.
    fast = load_profile_from(build_profile(h200, "llama-3.1-8b", "llama-3.2-1b", "c"))
    slow = load_profile_from(build_profile(h100, "llama-3.1-8b", "llama-3.2-1b", "c"))
    assert fast.step_time_s(1, 0, 512) < slow.step_time_s(1, 0, 512)


def load_profile_from(data: dict[str, Any]) -> Any:
    from nightjar.profile.profile import Profile

    return Profile.from_json(data, "mem")


def test_gpu_spec_inline_json_and_toml(tmp_path: Path) -> None:
    inline = parse_gpu_spec(SPEC)
    assert inline.peak_flops == 148e12 and inline.memory_bytes == int(95.6 * 2**30)
    keys = dict(kv.split("=") for kv in SPEC.split(","))
    as_json = _write(tmp_path / "g.json", {k: (v if k == "name" else float(v))
                                           for k, v in keys.items()})
    assert parse_gpu_spec(str(as_json)) == inline
    toml = tmp_path / "g.toml"
    toml.write_text("\n".join(f'{k} = "{v}"' if k == "name" else f"{k} = {v}"
                              for k, v in keys.items()), encoding="utf-8")
    assert parse_gpu_spec(str(toml)) == inline
    hopper = parse_gpu_spec(SPEC + ",like=H100-80GB")
    assert (hopper.like, hopper.all_reduce_table) == ("h100-80gb", "h100")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bf16_tflops=148,memory_bandwidth_gb_s=4000", "missing memory_gib, host_link_gb_s"),
        (SPEC.replace("=148", "=-148"), "bf16_tflops must be a positive number"),
        (SPEC.replace("=4000", "=fast"), "memory_bandwidth_gb_s must be a positive number"),
        (SPEC.replace("=50", "=nan"), "host_link_gb_s must be a positive number"),
        (SPEC + ",tflops=1", "unknown key 'tflops'"),
        ("bf16_tflops", "is not key=value"),
        ("/nonexistent/gpu.json", "--gpu-spec /nonexistent/gpu.json: cannot read (no such file)"),
        (SPEC.replace("name=h20", "name=a/b"), "name must be letters"),
        (SPEC + ",like=tpu", "like='tpu' is not a catalogue GPU"),
    ],
)
def test_bad_gpu_spec_is_one_line_exit_2(
    spec: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _cli("profile", "--roofline", "--gpu-spec", spec, "--model", "llama-3.1-8b",
                "--draft", "llama-3.2-1b", "--out", "/nonexistent/never.json")
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_unparseable_gpu_spec_file(tmp_path: Path) -> None:
    bad = tmp_path / "g.toml"
    bad.write_text("bf16_tflops = = 1", encoding="utf-8")
    with pytest.raises(NightjarInputError, match="malformed TOML"):
        parse_gpu_spec(str(bad))


def test_vocab_mismatch_refused_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(NightjarInputError, match="different vocabularies"):
        build_profile("h100-80gb", "llama-3.1-8b", "qwen2.5-0.5b", "c")
    assert _cli("profile", "--roofline", "--gpu", "h100-80gb", "--model", "vicuna-13b",
                "--draft", "llama-3.2-1b", "--out", str(tmp_path / "x.json")) == 2
    err = capsys.readouterr().err
    assert "different vocabularies (32000 vs 128256 token ids)" in err
    assert err.count("\n") == 1 and not (tmp_path / "x.json").exists()
    target = _write(tmp_path / "t" / "config.json", LLAMA_8B)
    draft = _write(tmp_path / "d" / "config.json", {**TINY_DRAFT, "vocab_size": 32000})
    assert _cli("profile", "--roofline", "--gpu", "h100-80gb", "--model-config", str(target),
                "--draft-config", str(draft), "--out", str(tmp_path / "y.json")) == 2
    assert "different vocabularies" in capsys.readouterr().err


def test_padded_embeddings_share_a_tokenizer(tmp_path: Path) -> None:
    """Qwen2.5 pads one tokenizer to 151,936 or 152,064 rows: the catalogue pair and
    a config pair with the tokenizer.json next to it are accepted; without it the
    padded sizes are all there is to compare, and differ."""
    build_profile("h100-80gb", "deepseek-r1-distill-qwen-7b", "qwen2.5-0.5b", "c")
    qwen = {k: v for k, v in LLAMA_8B.items() if k != "attention_bias"}
    qwen.update(model_type="qwen2", vocab_size=152064)  # Qwen2 configs have no bias key
    t = load_model_config(str(_write(tmp_path / "t" / "config.json", qwen)))
    d = load_model_config(str(_write(tmp_path / "d" / "config.json",
                                     {**TINY_DRAFT, "vocab_size": 151936})))
    assert t.qkv_bias and t.token_space != d.token_space
    tok = {"model": {"vocab": {"a": 0, "b": 151642}},
           "added_tokens": [{"id": 151664, "content": "<|x|>"}]}
    for where in ("t", "d"):
        _write(tmp_path / where / "tokenizer.json", tok)
    t = load_model_config(str(tmp_path / "t"))
    d = load_model_config(str(tmp_path / "d"))
    assert t.token_space == d.token_space == 151665
    build_profile("h100-80gb", t, d, "c")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hidden_size": None}, "missing hidden_size"),
        ({"num_hidden_layers": 0}, "num_hidden_layers must be a positive integer"),
        ({"torch_dtype": "int4"}, "torch_dtype 'int4'"),
        ({"num_local_experts": 8}, "mixture-of-experts"),
        ({"num_key_value_heads": 5}, "not a multiple of num_key_value_heads"),
    ],
)
def test_bad_model_config(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    cfg = {k: v for k, v in {**LLAMA_8B, **change}.items() if v is not None}
    path = _write(tmp_path / "m" / "config.json", cfg)
    with pytest.raises(NightjarInputError, match=message):
        load_model_config(str(path))


def test_unreadable_model_config(tmp_path: Path) -> None:
    with pytest.raises(NightjarInputError, match=r"model config .*: cannot read"):
        load_model_config(str(tmp_path / "none" / "config.json"))
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(NightjarInputError, match="malformed JSON"):
        load_model_config(str(tmp_path / "bad.json"))


def test_name_and_file_flags_exclude_each_other(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = _write(tmp_path / "m" / "config.json", LLAMA_8B)
    assert _cli("profile", "--roofline", "--gpu", "h200", "--gpu-spec", SPEC, "--model",
                "llama-3.1-8b", "--draft", "llama-3.2-1b") == 2
    assert "give --gpu or --gpu-spec, not both" in capsys.readouterr().err
    assert _cli("profile", "--roofline", "--gpu", "h200", "--model", "llama-3.1-8b",
                "--model-config", str(cfg), "--draft", "llama-3.2-1b") == 2
    assert "give --model or --model-config, not both" in capsys.readouterr().err
    assert _cli("profile", "--model-config", str(cfg), "--out", str(tmp_path / "x")) == 2
    assert "--model-config only with --roofline" in capsys.readouterr().err


def test_gpu_spec_like_borrows_the_op_fit() -> None:
    plain = build_profile(parse_gpu_spec(SPEC), "llama-3.1-8b", "llama-3.2-1b", "c")
    hopper = build_profile(
        parse_gpu_spec(SPEC + ",like=h100-80gb"), "llama-3.1-8b", "llama-3.2-1b", "c"
    )
    assert (plain["roofline"]["op_fit"], hopper["roofline"]["op_fit"]) == ("a100", "h100")
