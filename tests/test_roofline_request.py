"""``nightjar profile --roofline``'s request (nightjar/roofline/request.py) and the
measured profile's inputs (nightjar/live/profiling/inputs.py), below the command."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from nightjar.errors import NightjarInputError
from nightjar.live.profiling import inputs
from nightjar.roofline.request import RooflineRequest


def test_the_stored_command_repeats_the_request_in_a_fixed_order() -> None:
    req = RooflineRequest(gpu="a100-80gb", model="vicuna-13b", draft="vicuna-68m", tp=2,
                          block_size=16, enforce_eager=True, out="p.json")
    assert shlex.split(req.command()) == [
        "nightjar", "profile", "--roofline", "--gpu", "a100-80gb", "--model", "vicuna-13b",
        "--draft", "vicuna-68m", "--tp", "2", "--block-size", "16", "--enforce-eager",
        "--out", "p.json"]


def test_inputs_params_and_the_default_out_path() -> None:
    req = RooflineRequest(gpu="a100-80gb", model="vicuna-13b", draft="vicuna-68m")
    gpu, target, draft = req.inputs()
    assert draft is not None and req.kind == "draft_model" and req.ranks == 1
    assert req.out_path(gpu, target, draft) == Path(f"{gpu.name}__{target.name}+{draft.name}.json")
    deployment = RooflineRequest(num_gpu_blocks_override=100).deployment()
    assert deployment.kv_blocks_with_draft == deployment.kv_blocks_without_draft == 100
    assert RooflineRequest(block_size=32).params().block_size == 32


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"model": "vicuna-13b", "draft": "vicuna-68m"}, "--roofline needs --gpu"),
    ({"gpu": "a100-80gb", "gpu_spec": "x", "model": "vicuna-13b"}, "give --gpu or --gpu-spec"),
    ({"gpu": "a100-80gb", "model": "vicuna-13b", "speculative_config": "{}"},
     "is for measured profiling"),
])
def test_bad_inputs(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(NightjarInputError, match=needle):
        RooflineRequest(**kwargs).inputs()  # type: ignore[arg-type]


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"gpu_memory_utilization": 1.5}, "--gpu-memory-utilization must be in"),
    ({"block_size": 0}, "--block-size must be >= 1"),
    ({"activation_reserve_bytes": -1}, "--activation-reserve-bytes must be >= 0"),
    ({"max_model_len": 0}, "--max-model-len must be >= 1, got 0"),
    ({"variant": "a b"}, "--variant must be letters"),
    ({"verify_attention": "x"}, "--verify-attention 'x': use one of"),
])
def test_bad_params(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(NightjarInputError, match=needle):
        RooflineRequest(**kwargs).params()  # type: ignore[arg-type]


def test_measured_inputs(tmp_path: Path) -> None:
    assert inputs.int_list("4,1,2", "--gammas") == (1, 2, 4)
    assert inputs.int_list(" ", "--mixed-tokens") == ()
    assert inputs.seconds_list("", "--wake-pauses") == ()
    assert inputs.seconds_list("1,0.5", "--wake-pauses") == (0.5, 1.0)
    with pytest.raises(NightjarInputError, match="--gammas must be comma-separated integers"):
        inputs.int_list("1,x", "--gammas")
    assert inputs.model_name("org/model-7b") == "model-7b"
    assert inputs.model_name(str(tmp_path)) == tmp_path.name
    prompts = tmp_path / "p.txt"
    prompts.write_text("one\n\n two\n")
    assert inputs.read_prompts(str(prompts)) == ("one", " two")
    prompts.write_text("\n")
    with pytest.raises(NightjarInputError, match="no prompts"):
        inputs.read_prompts(str(prompts))
    assert inputs.speculative_config(None) is None
    assert inputs.speculative_config('{"method": "ngram"}') == {"method": "ngram"}
    for text, needle in (("{", "not JSON"), ("[]", "must be a JSON object"),
                         ('{"num_speculative_tokens": 2}', "comes from --gammas")):
        with pytest.raises(NightjarInputError, match=needle):
            inputs.speculative_config(text)
    with pytest.raises(NightjarInputError, match="no such profile file"):
        inputs.base_profile(str(tmp_path / "none.json"))
    assert inputs.base_profile(None) is None
