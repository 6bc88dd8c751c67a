"""``--tp N``: weights and KV split over N GPUs, two all-reduces per layer."""

from __future__ import annotations

import csv
from pathlib import Path
from types import ModuleType

import pytest

from nightjar import cli
from nightjar.profile.profile import Profile, load_profile
from nightjar.roofline.costs import build_profile
from nightjar.roofline.hardware import get_gpu, get_model
from nightjar.roofline.tensor_parallel import ALL_REDUCE_FIT, all_reduce_s, comm_s, shard
from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
TP_PROFILE = "h100-80gb-tp2/deepseek-r1-distill-qwen-32b+qwen2.5-0.5b"
PAIR = ("deepseek-r1-distill-qwen-32b", "qwen2.5-0.5b")


def _profile(tp: int, gpu: str = "h100-80gb") -> Profile:
    return Profile.from_json(build_profile(gpu, *PAIR, "c", tp=tp), "mem")


def test_tp2_halves_weights_and_raises_kv_capacity() -> None:
    one, two = _profile(1), _profile(2)
    m1, m2 = one.memory, two.memory
    # Everything but the replicated RMSNorm weights is split.
    assert m2.target_weight_bytes == pytest.approx(m1.target_weight_bytes / 2, rel=1e-4)
    assert m2.draft_weight_bytes == pytest.approx(m1.draft_weight_bytes / 2, rel=1e-3)
    assert m2.target_kv_bytes_per_token * 2 == m1.target_kv_bytes_per_token
    assert m2.kv_blocks(True) > 2 * m1.kv_blocks(True)  # half the KV, twice the free memory
    assert m2.kv_blocks(False) > 2 * m1.kv_blocks(False)


def test_kv_heads_replicate_when_fewer_than_ranks() -> None:
    d = shard(get_model("qwen2.5-0.5b"), 2)  # 2 KV heads over 2 ranks: one each
    assert (d.heads, d.kv_heads, d.tp) == (7, 1, 2)
    # The vocabulary stays whole (logits are gathered for sampling); the LM head's rows split.
    assert (d.vocab, d.vocab_rows) == (151936, 75968)
    t = shard(get_model("llama-3.2-1b"), 8)  # 8 KV heads: one each
    assert t.kv_heads == 1


def test_tp2_decode_is_faster_but_not_twice() -> None:
    one, two = _profile(1), _profile(2)
    for b in (1, 64):
        t1, t2 = one.step_time_s(b, 0, 512), two.step_time_s(b, 0, 512)
        assert t1 / 2 < t2 < t1, (b, t1, t2)
    # The all-reduces are what keeps it from 2x: without them TP=2 would be faster.
    gpu, t = get_gpu("h100-80gb"), shard(get_model(PAIR[0]), 2)
    comm = comm_s(gpu, t, 1)
    assert comm == pytest.approx(2 * 64 * all_reduce_s(gpu, 2, 5120 * 2))
    assert 2e-3 < comm < 8e-3  # 128 all-reduces of ~30 us


def test_all_reduce_model() -> None:
    h100, h200, rtx = get_gpu("h100-80gb"), get_gpu("h200"), get_gpu("rtx4090")
    assert all_reduce_s(h100, 1, 1e9) == 0.0
    small, big = all_reduce_s(h100, 2, 10_240), all_reduce_s(h100, 2, 64 << 20)
    assert 20e-6 < small < 50e-6 and big > 5 * small
    # H200 is not in Vidur's tables: the bus model at the H100's efficiency and the
    # same NVLink reproduces the H100 fit; a PCIe card is much slower on large messages.
    assert all_reduce_s(h200, 2, 64 << 20) == pytest.approx(big, rel=1e-9)
    assert all_reduce_s(rtx, 2, 64 << 20) > 5 * big


def _load_fit_script() -> ModuleType:
    return load_script("tools/calibrate/fit_all_reduce.py")


def test_fit_coefficients_come_from_the_committed_table() -> None:
    fit = _load_fit_script()
    groups: dict[tuple[str, int], list[tuple[float, float]]] = {}
    with open(ROOT / "tools" / "calibrate" / "vidur" / "all_reduce.csv", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            key = (row["gpu"], int(row["num_gpus"]))
            groups.setdefault(key, []).append((float(row["bytes"]), float(row["time_us"]) * 1e-6))
    assert set(groups) == set(ALL_REDUCE_FIT)
    for key, rows in groups.items():
        latency, algbw = fit.fit_rows(rows)
        assert ALL_REDUCE_FIT[key][0] == pytest.approx(latency, rel=2e-3)
        assert ALL_REDUCE_FIT[key][1] == pytest.approx(algbw, rel=2e-3)
        # Large messages (prefill) are within 25% of Vidur's medians.
        for nbytes, t in rows:
            if nbytes >= 8 << 20:
                assert abs(latency + nbytes / algbw - t) / t < 0.25, (key, nbytes)


@pytest.mark.parametrize(
    ("tp", "message"),
    [
        ("0", "--tp must be 1..8"),
        ("9", "--tp must be 1..8"),
        ("3", "--tp 3 does not divide deepseek-r1-distill-qwen-32b's 40 attention heads"),
        ("4", "--tp 4 does not divide qwen2.5-0.5b's 14 attention heads"),
    ],
)
def test_bad_tp_is_one_line_exit_2(
    tp: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    code = cli.main(["profile", "--roofline", "--gpu", "h100-80gb", "--model", PAIR[0],
                     "--draft", PAIR[1], "--tp", tp, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1 and not out.exists()


def test_tp_needs_roofline(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profile", "--model", "x", "--draft", "y", "--tp", "2"]) == 2
    assert "--tp only with --roofline" in capsys.readouterr().err


def test_bundled_tp_profile_loads_and_simulates(tmp_path: Path) -> None:
    p = load_profile(TP_PROFILE)
    assert p.source == "calibrated-roofline" and "--tp 2" in p.command
    assert p.memory.kv_blocks(True) > 2 * _profile(1).memory.kv_blocks(True)
    assert cli.main(["sim", "--quiet", "--no-report", "--no-oracle", "--trace", "steady_low",
                     "--profile", TP_PROFILE, "--policy", "nospec", "--policy", "nightjar",
                     "--out", str(tmp_path / "run")]) == 0


def test_show_says_per_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["profile", "--show", TP_PROFILE]) == 0
    assert "tensor parallel 2: memory and KV blocks are per GPU" in capsys.readouterr().out


def test_config_gpu_spec_and_tp_together(tmp_path: Path) -> None:
    """A GPU Vidur never measured, models from config files, TP 2: the bus model."""
    import json

    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
           "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
           "vocab_size": 128256, "torch_dtype": "bfloat16"}
    small = {**cfg, "hidden_size": 1024, "num_hidden_layers": 4, "intermediate_size": 2816}
    for name, c in (("t", cfg), ("d", small)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps(c), encoding="utf-8")
    spec = ("name=pcie-card,bf16_tflops=200,memory_bandwidth_gb_s=1000,memory_gib=24,"
            "host_link_gb_s=25")
    outs = []
    for extra in ("", ",nvlink_gb_s=300"):
        out = tmp_path / f"p{len(outs)}.json"
        assert cli.main(["profile", "--roofline", "--gpu-spec", spec + extra, "--model-config",
                         str(tmp_path / "t"), "--draft-config", str(tmp_path / "d"),
                         "--tp", "2", "--out", str(out)]) == 0
        outs.append(load_profile(str(out)))
    pcie, nvlink = outs
    hw = pcie.to_json()["hardware"]
    assert hw["tensor_parallel"] == 2 and hw["all_reduce_model"].startswith("bus-bandwidth")
    assert pcie.name == "pcie-card-tp2/t+d"
    # Over PCIe the all-reduces of a large verify pass cost more than over NVLink.
    assert pcie.step_time_s(256, 3, 512) > nvlink.step_time_s(256, 3, 512)
