"""``nightjar live --profile roofline:GPU``: a roofline prior built from the pair's configs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.errors import NightjarInputError
from nightjar.live.profiling.latency import Clamped, load_latency
from nightjar.roofline.prior_file import roofline_prior


def _config(folder: Path, layers: int, hidden: int) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": 16,
        "num_key_value_heads": 4, "intermediate_size": 4 * hidden, "vocab_size": 32000,
        "torch_dtype": "bfloat16",
    }))
    return folder


def test_the_roofline_of_the_pair_becomes_the_prior(tmp_path: Path) -> None:
    target = _config(tmp_path / "target", 32, 4096)
    draft = _config(tmp_path / "draft", 2, 1024)
    path = roofline_prior("a100-80gb", str(target), str(draft))
    latency, alpha = load_latency(path)
    assert isinstance(latency, Clamped) and alpha is None
    # A model of the hardware, in its shape: speculating costs more at every batch,
    # and a large batch costs more than a small one.
    for b in (1, 64):
        times = [latency.step_time_s(b, g, 512.0) for g in range(4)]
        assert times == sorted(times) and times[0] > 0
    assert latency.step_time_s(256, 0, 512.0) > latency.step_time_s(1, 0, 512.0)


def test_a_roofline_prior_needs_a_draft_and_a_known_gpu(tmp_path: Path) -> None:
    target = _config(tmp_path / "target", 4, 512)
    with pytest.raises(NightjarInputError, match="needs a draft"):
        roofline_prior("a100-80gb", str(target), None)
    with pytest.raises(NightjarInputError, match="unknown GPU"):
        roofline_prior("no-such-gpu", str(target), str(target))
