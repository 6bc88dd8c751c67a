"""A vLLM user's spellings and a typo's nearest name (issue 39)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.cli import main
from nightjar.core.policy import PolicyEnv
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import make_policy


def test_an_unknown_policy_names_the_nearest_one() -> None:
    with pytest.raises(NightjarInputError, match="did you mean 'nightjar\\+'"):
        make_policy("nightjr+", PolicyEnv())
    with pytest.raises(NightjarInputError) as info:
        make_policy("zzz", PolicyEnv())
    assert "did you mean" not in str(info.value) and "known:" in str(info.value)


@pytest.mark.parametrize("flag", ["--tensor-parallel-size", "-tp"])
def test_profile_takes_vllms_tensor_parallel_spelling(tmp_path: Path, flag: str) -> None:
    args = ["profile", "--roofline", "--gpu", "h100-80gb", "--model", "llama-3.1-8b",
            "--draft", "llama-3.2-1b"]
    assert main([*args, "--tp", "2", "--out", str(tmp_path / "short.json")]) == 0
    assert main([*args, flag, "2", "--out", str(tmp_path / "long.json")]) == 0
    short = json.loads((tmp_path / "short.json").read_text(encoding="utf-8"))
    long = json.loads((tmp_path / "long.json").read_text(encoding="utf-8"))
    assert short["name"] == long["name"] == "h100-80gb-tp2/llama-3.1-8b+llama-3.2-1b"
    assert short["decode"] == long["decode"]
