"""Profile format, validation, interpolation, loading and the ``nightjar profile`` CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import nightjar.cli as cli
from nightjar.errors import NightjarInputError
from nightjar.profile.profile import (
    DEFAULT_PROFILE,
    MemoryFacts,
    Profile,
    ProfileRangeError,
    bundled_profiles,
    load_profile,
)

A100 = DEFAULT_PROFILE


def _rows(data: dict[str, Any]) -> dict[tuple[int, int, float], list[float]]:
    return {(r[0], r[1], float(r[2])): r[3:] for r in data["decode"]}


@pytest.fixture
def data() -> dict[str, Any]:
    return load_profile(A100).to_json()


def test_bundled_names_and_default() -> None:
    names = bundled_profiles()
    assert A100 in names
    assert "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b" in names
    p = load_profile(A100)
    assert p.name == A100 and p.source == "calibrated-roofline"
    assert (p.gpu, p.target, p.draft) == ("a100-80gb", "vicuna-13b", "vicuna-68m")
    assert p.gamma_max == 8 and p.max_batch_size == 512


def test_json_round_trip(data: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    again = load_profile(str(path))
    assert again.to_json() == data
    a, b = load_profile(A100), again
    for args in [(1, 0, 128.0), (37, 3, 777.0), (512, 8, 32768.0)]:
        assert a.decode_timing(*args) == b.decode_timing(*args)
    assert a.memory == b.memory
    assert a.acceptance("sharegpt") == b.acceptance("sharegpt") == (0.6, 8.0)
    assert a.acceptance("no-such-workload") is None


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["memory"].pop("block_size"), "'memory.block_size' is missing"),
        (lambda d: d["memory"].update(block_size="16"), "'memory.block_size' must be an integer"),
        (lambda d: d["memory"].update(device_bytes=-5), "'memory.device_bytes' must be > 0"),
        (lambda d: d["memory"].update(gpu_memory_utilization=1.5), "must be in (0, 1]"),
        (lambda d: d["decode"][3].__setitem__(3, -1.0), "'decode[3].step_ms' must be >= 0"),
        (lambda d: d["decode"][0].__setitem__(0, 0), "'decode[0].batch_size' must be > 0"),
        (lambda d: d["decode"][0].__setitem__(2, float("nan")), "must be a finite number"),
        (lambda d: d["decode"].pop(), "is not a full grid"),
        (lambda d: d.update(decode=[r for r in d["decode"] if r[1] != 2]), "without gaps"),
        (lambda d: d["decode"].append(list(d["decode"][0])), "duplicate"),
        (lambda d: d["decode"][0].pop(), "must be a row [batch_size"),
        (lambda d: d["draft_forward"].pop(), "draft_forward"),
        (lambda d: d.pop("prefill"), "'prefill' is missing"),
        (lambda d: d.update(format_version=99), "'format_version' is 99"),
        (lambda d: d.update(source="guess"), "must be one of measured, calibrated-roofline"),
        (lambda d: d["acceptance"]["sharegpt"].update(mean=1.2), "'acceptance.sharegpt.mean'"),
        (lambda d: d["acceptance"]["alpaca"].pop("concentration"), "concentration' is missing"),
        (lambda d: d.pop("name"), "'name' is missing"),
    ],
)
def test_validation_errors(data: dict[str, Any], edit: Any, needle: str) -> None:
    edit(data)
    with pytest.raises(NightjarInputError) as info:
        Profile.from_json(data, "bad.json")
    msg = str(info.value)
    assert needle in msg and msg.startswith("profile bad.json:") and "\n" not in msg


def test_invalid_json_file(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text("{not json")
    with pytest.raises(NightjarInputError, match=r"broken\.json: malformed JSON"):
        load_profile(str(path))
    with pytest.raises(NightjarInputError, match="cannot read"):
        load_profile(str(tmp_path / "absent.json"))


def test_unknown_name_lists_bundled() -> None:
    with pytest.raises(NightjarInputError) as info:
        load_profile("tpu/unknown")
    assert "tpu/unknown" in str(info.value) and A100 in str(info.value)


def test_exact_at_grid_points(data: dict[str, Any]) -> None:
    p = load_profile(A100)
    for (b, g, c), (step, draft, verify) in list(_rows(data).items())[::37]:
        t = p.decode_timing(b, g, c)
        assert (t.step_s, t.draft_s, t.verify_s) == pytest.approx(
            (step / 1e3, draft / 1e3, verify / 1e3), rel=1e-12
        )
        assert p.step_time_s(b, g, c) == pytest.approx(t.step_s, rel=1e-12)


def test_linear_between_grid_points(data: dict[str, Any]) -> None:
    p, rows = load_profile(A100), _rows(data)
    # Batch 20 lies half way between grid points 16 and 24; context 768 half way
    # between 512 and 1024: bilinear blend of the four corners.
    corners = [rows[(b, 3, c)][0] for b in (16, 24) for c in (512.0, 1024.0)]
    assert p.step_time_s(20, 3, 768.0) == pytest.approx(sum(corners) / 4 / 1e3, rel=1e-9)
    lo, hi = rows[(16, 0, 128.0)][2], rows[(24, 0, 128.0)][2]
    assert p.decode_timing(18, 0, 128.0).verify_s == pytest.approx(
        (lo + (hi - lo) / 4) / 1e3, rel=1e-9
    )
    fwd = {(r[0], float(r[1])): r[2] for r in data["draft_forward"]}
    # Context 256 lies a third of the way from grid point 128 to 512.
    assert p.draft_forward_s(8, 256.0) == pytest.approx(
        (fwd[(8, 128.0)] + (fwd[(8, 512.0)] - fwd[(8, 128.0)]) / 3) / 1e3, rel=1e-9
    )
    pf = {r[0]: r[1:] for r in data["prefill"]}
    assert p.prefill_time_s(768) == pytest.approx((pf[512][0] + pf[1024][0]) / 2 / 1e3)
    assert p.draft_prefill_time_s(1024) == pytest.approx(pf[1024][1] / 1e3)
    assert p.prefill_time_s(0) == 0.0


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda p: p.decode_timing(0, 1, 128.0), "batch size 0 is not >= 1"),
        (lambda p: p.decode_timing(4, 9, 128.0), "gamma 9 not in the table (0..8)"),
        (lambda p: p.prefill_time_s(70000), "prefill of 70000 tokens outside"),
    ],
)
def test_refuses_what_no_clamp_can_price(call: Any, needle: str) -> None:
    with pytest.raises(ProfileRangeError) as info:
        call(load_profile(A100))
    assert needle in str(info.value)
    assert isinstance(info.value, NightjarInputError)


@pytest.mark.parametrize(
    ("off", "edge"),
    [
        ((4, 40000.0), (4, 2048.0)),  # the grid stops at vicuna-13b's window
        ((4, -1.0), (4, 0.0)),
        ((4, float("nan")), (4, 0.0)),
    ],
)
def test_off_grid_lookups_are_priced_at_the_edge(
    off: tuple[int, float], edge: tuple[int, float]
) -> None:
    # Issues #13/#15: every lookup outside the grid is priced at its edge, never refused.
    p = load_profile(A100)
    assert p.off_grid(*off) and not p.off_grid(*edge)
    assert p.clamp(*off) == edge
    assert p.step_time_s(off[0], 2, off[1]) == p.step_time_s(edge[0], 2, edge[1])
    assert p.decode_timing(off[0], 3, off[1]) == p.decode_timing(edge[0], 3, edge[1])
    assert p.draft_forward_s(*off) == p.draft_forward_s(*edge)


@pytest.mark.parametrize("b", [513, 600, 1000])
def test_a_batch_past_the_grid_is_priced_along_the_last_segment(b: int) -> None:
    # Held flat, a batch of 160 on a grid ending at 64 was priced at half what the CPU
    # engine took; along the last segment within 5% (experiments/batch_extrapolation.py).
    p = load_profile(A100)
    lo, hi = p.batch_sizes[-2], p.batch_sizes[-1]
    assert p.off_grid(b, 128.0) and p.clamp(b, 128.0) == (b, 128.0)
    w = (b - lo) / (hi - lo)
    for g in p.gammas:
        x, y = p.step_time_s(lo, g, 128.0), p.step_time_s(hi, g, 128.0)
        assert y > x
        assert p.step_time_s(b, g, 128.0) == pytest.approx(x + w * (y - x), rel=1e-12)
        # The inlined lookup and the general one agree past the grid too.
        assert p.step_time_s(b, g, 300.0) == p.decode_timing(b, g, 300.0).step_s
    x, y = p.draft_forward_s(lo, 128.0), p.draft_forward_s(hi, 128.0)
    assert p.draft_forward_s(b, 128.0) == pytest.approx(x + w * (y - x), rel=1e-12)
    assert p.step_time_s(b + 1, 2, 128.0) > p.step_time_s(b, 2, 128.0)


def test_a_last_segment_that_falls_is_held_flat_past_the_grid(data: dict[str, Any]) -> None:
    # A measured table can have a larger batch cheaper (noise): carrying that on would
    # price a larger batch cheaper still, so such an entry stays at the largest batch's.
    top = max(r[0] for r in data["decode"])
    below = max(r[0] for r in data["decode"] if r[0] < top)
    at_below = {(r[1], r[2]): r for r in data["decode"] if r[0] == below}
    for r in data["decode"]:
        if r[0] == top and r[1] == 0:
            r[3:] = [0.9 * v for v in at_below[(r[1], r[2])][3:]]
    p = Profile.from_json(data, "falls.json")
    assert p.step_time_s(top + 300, 0, 128.0) == p.step_time_s(top, 0, 128.0)
    assert p.step_time_s(top + 300, 1, 128.0) > p.step_time_s(top, 1, 128.0)


def test_context_below_a_measured_grid_is_priced_at_its_first_row(
    data: dict[str, Any],
) -> None:
    # The profiler's default grid starts at context 128; a 25-token context (short
    # prompts, issue #15) used to be refused by every lookup.
    data["decode"] = [r for r in data["decode"] if r[2] >= 128]
    data["draft_forward"] = [r for r in data["draft_forward"] if r[1] >= 128]
    p = Profile.from_json(data, "grid128.json")
    assert p.step_time_s(4, 1, 25.0) == p.step_time_s(4, 1, 128.0)


def test_prefill_below_the_first_row_is_linear_from_zero(data: dict[str, Any]) -> None:
    data["prefill"] = [r for r in data["prefill"] if r[0] >= 16]
    p = Profile.from_json(data, "pf16.json")
    assert p.prefill_time_s(8) == pytest.approx(p.prefill_time_s(16) / 2)


def test_gamma_not_in_table_of_a_smaller_profile(data: dict[str, Any]) -> None:
    data["decode"] = [r for r in data["decode"] if r[1] <= 4]
    p = Profile.from_json(data, "small.json")
    assert p.gamma_max == 4 and p.gammas == (0, 1, 2, 3, 4)
    with pytest.raises(ProfileRangeError, match="gamma 5 not in the table"):
        p.decode_timing(1, 5, 128.0)


def test_memory_model_by_hand() -> None:
    mem = MemoryFacts(
        device_bytes=1000,
        gpu_memory_utilization=0.9,
        target_weight_bytes=300,
        draft_weight_bytes=50,
        activation_reserve_bytes=100,
        target_kv_bytes_per_token=3,
        draft_kv_bytes_per_token=1,
        block_size=2,
        host_link_bytes_per_s=10.0,
        device_bandwidth_bytes_per_s=1e3,
    )
    assert mem.kv_blocks(False) == 500 // 6  # (900 - 300 - 100) / (2 * 3)
    assert mem.kv_blocks(True) == 450 // 8  # (900 - 350 - 100) / (2 * 4)
    assert mem.draft_blocks == 83 - 56
    assert mem.draft_transfer_s == 5.0


def _cli(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    # Only this sub-command: the others may not exist yet in this tree.
    monkeypatch.setattr(cli, "COMMANDS", ("profile",))
    return cli.main(["profile", *argv])


def test_cli_roofline_writes_and_refuses_overwrite(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p.json"
    args = (
        "--roofline",
        "--gpu",
        "l40s",
        "--model",
        "llama-3.1-8b",
        "--draft",
        "llama-3.2-1b",
        "--out",
        str(out),
    )
    assert _cli(monkeypatch, *args) == 0
    p = load_profile(str(out))
    assert p.source == "calibrated-roofline" and p.command.endswith(f"--out {out}")
    assert _cli(monkeypatch, *args) == 2
    assert "exists; pass --force to overwrite it" in capsys.readouterr().err
    assert _cli(monkeypatch, *args, "--force") == 0


def test_cli_errors_are_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(monkeypatch, "--model", "/models/x") == 2
    assert "measured profiling needs --out" in capsys.readouterr().err
    assert _cli(monkeypatch, "--roofline", "--gpu", "tpu9", "--model", "a", "--draft", "b") == 2
    assert "unknown GPU 'tpu9'" in capsys.readouterr().err
    assert _cli(monkeypatch, "--roofline", "--gpu", "l40s") == 2
    assert "--model (or --model-config), --draft (or --draft-config)" in capsys.readouterr().err
    assert _cli(monkeypatch, "--show", A100, "--context", "1e6") == 2
    err = capsys.readouterr().err
    assert "context length" in err and err.count("\n") == 1


def test_cli_list_and_show(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(monkeypatch, "--list") == 0
    text = capsys.readouterr().out
    assert "rtx4090" in text and "qwen2.5-0.5b" in text and A100 in text
    assert _cli(monkeypatch, "--show", A100) == 0
    text = capsys.readouterr().out
    blocks = load_profile(A100).memory.kv_blocks(False)
    assert f"{blocks} without draft" in text and "gamma 3" in text
    assert "max_model_len: 2048 tokens" in text  # vicuna-13b's window


def test_show_names_the_acceptance_each_workload_is_simulated_with(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = load_profile(A100).to_json()
    data["acceptance"] = {}  # as a profile made from two config.json files holds
    path = tmp_path / "no-acceptance.json"
    path.write_text(json.dumps(data))
    assert _cli(monkeypatch, "--show", str(path)) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "acceptance of other workloads: the workload default, not this pair's" in text
    assert "sharegpt 0.60" in text and "(assumed by the profile)" not in text
    assert _cli(monkeypatch, "--show", A100) == 0
    assert "acceptance sharegpt: mean 0.60, concentration 8 (assumed by the profile)" in (
        capsys.readouterr().out)


def test_a_lookup_far_past_the_grid_costs_one_row() -> None:
    """Batch 10**6 is priced from the last segment carried on, without building a row
    for every batch size up to it (which took minutes and gigabytes)."""
    profile = load_profile(DEFAULT_PROFILE)
    near = profile.max_batch_size + 1
    far = profile.step_time_s(10**6, 1, 100.0)
    assert far >= profile.step_time_s(near, 1, 100.0)
    assert profile.decode_timing(10**6, 1, 100.0).step_s == far
    assert profile.draft_forward_s(10**6, 100.0) >= profile.draft_forward_s(near, 100.0)
    assert len(profile._decode[1]) == profile.max_batch_size + 1  # no dense growth
