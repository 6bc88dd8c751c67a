"""Drafter kinds in profiles, the roofline and the simulator.

A profile's optional ``drafter`` (draft_model, eagle, eagle3, mtp, ngram, suffix)
says what speculates; old profiles without it are draft models and load unchanged.
The roofline derives an EAGLE/EAGLE-3 head or an MTP layer from the target (one
layer at its shape, its KV per token), or prices an n-gram/suffix lookup as a host
cost with no weights and no KV. The simulator reserves no draft slots and pays no
catch-up for a lookup drafter, and refuses to offload what has no weights of its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nightjar.cli import main
from nightjar.core.drafter import DRAFTERS, drafter_kind
from nightjar.errors import NightjarInputError
from nightjar.profile.profile import Profile, bundled_profiles, load_profile
from nightjar.roofline.costs import build_profile
from nightjar.roofline.hardware import get_model
from nightjar.sim import DraftKVMode, SimConfig, simulate
from nightjar.trace.trace import load_trace

H100, LLAMA = "h100-80gb", "llama-3.1-8b"


def _roofline(kind: str, model: str = LLAMA) -> Profile:
    return Profile.from_json(build_profile(H100, model, None, "test", drafter=kind), kind)


def test_the_done_when_commands_run(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "p.json"
    argv = ["profile", "--roofline", "--drafter", "eagle3", "--gpu", H100, "--model", LLAMA,
            "--out", str(out)]
    assert main(argv) == 0
    assert load_profile(str(out)).drafter == "eagle3"
    assert "--drafter eagle3" in load_profile(str(out)).command
    assert main(["sim", "--profile", str(out), "--trace", "burst", "--policy", "nightjar+",
                 "--policy", "fixed:3", "--no-oracle", "--out", str(tmp_path / "sim"),
                 "--no-report"]) == 0
    ngram = tmp_path / "ngram.json"
    assert main(["profile", "--roofline", "--drafter", "ngram", "--gpu", H100, "--model", LLAMA,
                 "--out", str(ngram)]) == 0
    capsys.readouterr()
    assert main(["sim", "--profile", str(ngram), "--trace", "burst", "--offload", "on"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert err.startswith("nightjar: error: --offload on: the ngram drafter has no weights")


def test_bundled_profiles_are_draft_models() -> None:
    for name in bundled_profiles():
        assert load_profile(name).drafter == "draft_model", name


@pytest.mark.parametrize("kind", ["eagle", "eagle3", "ngram", "suffix"])
def test_roofline_memory_of_each_kind(kind: str) -> None:
    p, t = _roofline(kind), get_model(LLAMA)
    mem = p.memory
    assert p.drafter == kind and p.name == f"{H100}/{LLAMA}+{kind}"
    assert mem.target_weight_bytes == t.weight_bytes
    if drafter_kind(kind).has_kv:
        # One decoder layer at the target's shape: 1/layers of the target's KV.
        assert mem.draft_kv_bytes_per_token * t.layers == t.kv_bytes_per_token
        # A head is hundreds of MB: one layer, its fc, for EAGLE-3 its own LM head.
        assert 300 << 20 < mem.draft_weight_bytes < 1200 << 20
        assert mem.kv_blocks(True) < mem.kv_blocks(False)
    else:
        assert mem.draft_weight_bytes == mem.draft_kv_bytes_per_token == 0
        assert mem.kv_blocks(True) == mem.kv_blocks(False)
        # A lookup costs host time per speculative step, the same for every gamma > 0,
        # and nothing to prefill or keep in sync.
        drafts = {p.decode_timing(8, g, 512).draft_s for g in range(1, p.gamma_max + 1)}
        assert len(drafts) == 1 and drafts.pop() > 0
        assert p.draft_prefill_time_s(1024) == 0 and p.draft_forward_s(8, 512) == 0


def test_an_eagle3_head_costs_less_than_a_draft_model_and_more_than_a_lookup() -> None:
    head, lookup = _roofline("eagle3"), _roofline("ngram")
    draft = Profile.from_json(build_profile(H100, LLAMA, "llama-3.2-1b", "t"), "dm")
    for b in (1, 64):
        d = [p.decode_timing(b, 3, 512).draft_s for p in (lookup, head, draft)]
        assert d == sorted(d) and d[0] < d[1] < d[2]


def test_mtp_needs_a_target_with_mtp_layers(tmp_path: Path) -> None:
    with pytest.raises(NightjarInputError, match="has no MTP layers"):
        _roofline("mtp")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "model_type": "qwen2", "architectures": ["MiMoForCausalLM"], "hidden_size": 4096,
        "num_hidden_layers": 36, "num_attention_heads": 32, "num_key_value_heads": 8,
        "intermediate_size": 11008, "vocab_size": 151680, "num_nextn_predict_layers": 1,
        "torch_dtype": "bfloat16",
    }))
    out = tmp_path / "mtp.json"
    argv = ["profile", "--roofline", "--drafter", "mtp", "--gpu", H100, "--model-config",
            str(config), "--out", str(out)]
    assert main(argv) == 0
    p = load_profile(str(out))
    assert p.drafter == "mtp" and p.memory.draft_weight_bytes > 0
    assert p.memory.draft_kv_bytes_per_token > 0


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--drafter", "eagle3", "--draft", "llama-3.2-1b"], "drop --draft"),
        (["--drafter", "medusa"], "choose from draft_model"),
        (["--drafter", "mtp"], "has no MTP layers"),
    ],
)
def test_bad_roofline_drafters(argv: list[str], needle: str, capsys: Any, tmp_path: Path) -> None:
    base = ["profile", "--roofline", "--gpu", H100, "--model", LLAMA, "--out",
            str(tmp_path / "x.json")]
    assert main([*base, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err, err


def _edited(name: str, **changes: Any) -> dict[str, Any]:
    data = load_profile(name).to_json()
    for key, value in changes.items():
        if key.startswith("memory."):
            data["memory"][key.split(".", 1)[1]] = value
        else:
            data[key] = value
    return data


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        ({"drafter": "medusa"}, "field 'drafter' must be one of"),
        ({"drafter": "ngram"}, "draft_kv_bytes_per_token' must be 0 for the ngram drafter"),
        ({"drafter": "ngram", "memory.draft_kv_bytes_per_token": 0},
         "draft_weight_bytes' must be 0 for the ngram drafter"),
    ],
)
def test_profile_drafter_field_is_checked(changes: dict[str, Any], needle: str) -> None:
    data = _edited("a100-80gb/vicuna-13b+vicuna-68m", **changes)
    with pytest.raises(NightjarInputError, match=needle.replace("(", r"\(")):
        Profile.from_json(data, "edited")


@pytest.mark.parametrize("kind", ["ngram", "suffix", "mtp"])
def test_offload_is_refused_for_drafters_without_weights(kind: str, tmp_path: Path) -> None:
    import nightjar

    if kind == "mtp":
        data = _edited("a100-80gb/vicuna-13b+vicuna-68m", drafter="mtp")
    else:
        data = build_profile(H100, LLAMA, None, "t", drafter=kind)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    with pytest.raises(NightjarInputError, match="offload"):
        nightjar.simulate("burst", str(path), "nightjar", offload=True, oracle=False)
    nightjar.simulate("burst", str(path), "nightjar", offload=False, oracle=False)


def test_a_lookup_drafter_never_pays_a_switch_and_reserves_no_draft_slot() -> None:
    trace = load_trace("burst")
    config = SimConfig(draft_kv_mode=DraftKVMode.SKIP)
    lookup = simulate(trace, _roofline("ngram"), "nightjar", config).steps_frame()
    head = simulate(trace, _roofline("eagle3"), "nightjar", config).steps_frame()
    assert (lookup["gamma"] > 0).any() and (lookup["gamma"] == 0).any()
    assert (lookup["switch_cost_s"] == 0).all()
    assert (head["switch_cost_s"] > 0).any()  # a head's KV goes stale at gamma 0


def test_runs_with_a_drafter_kind_are_deterministic() -> None:
    trace = load_trace("burst")
    a = simulate(trace, _roofline("eagle3"), "nightjar+", SimConfig(seed=3)).steps_frame()
    b = simulate(trace, _roofline("eagle3"), "nightjar+", SimConfig(seed=3)).steps_frame()
    assert a.equals(b)


def test_every_kind_is_known_to_the_core() -> None:
    assert set(DRAFTERS) == {"draft_model", "eagle", "eagle3", "mtp", "ngram", "suffix"}
    assert [k for k, v in DRAFTERS.items() if v.own_weights] == ["draft_model", "eagle", "eagle3"]
    with pytest.raises(NightjarInputError, match="choose from"):
        drafter_kind("medusa")
