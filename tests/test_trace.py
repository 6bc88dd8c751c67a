"""Trace loading, validation, generation and the `nightjar trace gen|show` command."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nightjar.cli import _Parser
from nightjar.commands import trace as trace_cmd
from nightjar.errors import NightjarInputError
from nightjar.trace.trace import (
    Trace,
    arrival_rates,
    bundled_traces,
    interarrival_cv,
    load_trace,
    trace_to_json,
)


def _write(tmp_path: Path, obj: Any, name: str = "t.json") -> str:
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(p)


def _seg_trace(tmp_path: Path, segments: list[dict[str, Any]], seed: int = 0) -> str:
    return _write(tmp_path, {"format_version": 1, "seed": seed, "segments": segments})


def _cli(argv: list[str]) -> int:
    parser = _Parser(prog="nightjar")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    trace_cmd.add_parser(sub)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def test_bundled_traces_load_by_name() -> None:
    names = bundled_traces()
    for required in ("burst", "oscillation", "migration", "steady", "steady_low", "steady_high"):
        assert required in names
    for name in names:
        t = load_trace(name)
        assert t.name == name and len(t) > 15
        # The live-* validation traces are sized for a CPU engine: 1-3 min of replay.
        assert (50 if name.startswith("live-") else 100) <= t.duration_s <= 180
        assert np.all(np.diff(t.arrival_s) >= 0)
    assert len(load_trace("burst.json")) == len(load_trace("burst"))


def test_burst_shape_follows_its_segments() -> None:
    t = load_trace("burst")
    rates = arrival_rates(t, 30.0)
    # 2 -> 8 -> 24 -> 40 -> 6 req/s; bursty segments are noisy, so loose bounds.
    for got, want in zip(rates, [2, 8, 24, 40, 6], strict=True):
        assert got == pytest.approx(want, rel=0.35)
    low, high = load_trace("steady_low"), load_trace("steady_high")
    assert len(high) > 20 * len(low)


def test_missing_trace_lists_bundled_names() -> None:
    with pytest.raises(NightjarInputError, match=r"'nope' not found.*bundled: .*burst"):
        load_trace("nope")


def test_explicit_trace_sorted_stably_and_round_trips(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        {
            "name": "x",
            "seed": 3,
            "workload": "alpaca",
            "requests": [
                {"arrival_s": 2.0, "prompt_tokens": 5, "output_tokens": 7, "prompt": "b"},
                {
                    "arrival_s": 0.5,
                    "prompt_token_ids": [1, 2, 3],
                    "output_tokens": 4,
                    "workload": "sharegpt",
                    "acceptance": 0.3,
                },
                {"arrival_s": 2.0, "prompt_tokens": 9, "output_tokens": 1},
            ],
        },
    )
    t = load_trace(path)
    assert t.arrival_s.tolist() == [0.5, 2.0, 2.0]
    assert t.prompt_tokens.tolist() == [3, 5, 9]  # equal arrivals keep file order
    assert t.workload.tolist() == ["sharegpt", "alpaca", "alpaca"]
    assert t.acceptance[0] == 0.3 and np.isnan(t.acceptance[1:]).all()
    assert t.prompts == [[1, 2, 3], "b", None]
    assert t.seed == 3 and t.duration_s == 2.0
    back = load_trace(_write(tmp_path, trace_to_json(t), "back.json"))
    for field in ("arrival_s", "prompt_tokens", "output_tokens", "workload"):
        assert np.array_equal(getattr(back, field), getattr(t, field))
    assert np.array_equal(back.acceptance, t.acceptance, equal_nan=True)
    assert back.prompts == t.prompts and back.name == "x"


def test_generative_is_deterministic_and_seed_overrides(tmp_path: Path) -> None:
    path = _seg_trace(tmp_path, [{"duration_s": 20, "rate_rps": 5, "burstiness": 0.5}], seed=4)
    a, b = load_trace(path), load_trace(path)
    c = load_trace(path, seed=5)
    assert np.array_equal(a.arrival_s, b.arrival_s)
    assert np.array_equal(a.output_tokens, b.output_tokens)
    assert a.seed == 4 and c.seed == 5
    assert not np.array_equal(a.arrival_s[:10], c.arrival_s[:10])
    assert a.duration_s == 20.0 and a.arrival_s.max() < 20.0


def test_generative_rate_within_sampling_error(tmp_path: Path) -> None:
    t = load_trace(_seg_trace(tmp_path, [{"duration_s": 200, "rate_rps": 10}]))
    # ~2000 Poisson arrivals: sd of the count is ~45 (2.2%), so 5% is > 2 sigma.
    assert len(t) / 200 == pytest.approx(10, rel=0.05)


@pytest.mark.parametrize("shape", [0.25, 1.0, 4.0])
def test_burstiness_sets_interarrival_cv(tmp_path: Path, shape: float) -> None:
    t = load_trace(
        _seg_trace(tmp_path, [{"duration_s": 400, "rate_rps": 10, "burstiness": shape}], seed=1)
    )
    assert interarrival_cv(t) == pytest.approx(1 / math.sqrt(shape), rel=0.1)


def test_segment_overrides(tmp_path: Path) -> None:
    t = load_trace(
        _seg_trace(
            tmp_path,
            [
                {
                    "duration_s": 10,
                    "rate_rps": 5,
                    "prompt_tokens": 32,
                    "output_tokens": {"dist": "uniform", "min": 10, "max": 20},
                    "acceptance": 0.4,
                },
                {"duration_s": 10, "rate_rps": 0},
                {"duration_s": 10, "rate_rps": 5, "workload": "alpaca"},
            ],
        )
    )
    first = t.arrival_s < 10
    assert (t.prompt_tokens[first] == 32).all() and (t.acceptance[first] == 0.4).all()
    assert t.output_tokens[first].min() >= 10 and t.output_tokens[first].max() <= 20
    assert not ((t.arrival_s >= 10) & (t.arrival_s < 20)).any()  # the idle segment
    assert set(t.workload[t.arrival_s >= 20]) == {"alpaca"}
    assert np.isnan(t.acceptance[~first]).all() and t.duration_s == 30.0


BAD_CASES: list[tuple[Any, str]] = [
    ("{not json", "malformed JSON at line 1"),
    ([], "must be a JSON object"),
    ({"requests": []}, "empty trace"),
    ({}, "exactly one of 'requests' and 'segments'"),
    ({"requests": [], "segments": []}, "exactly one of"),
    ({"requests": {}}, "'requests' must be a list"),
    ({"reqests": []}, r"unknown field 'reqests' \(did you mean 'requests'\?\)"),
    ({"format_version": 2, "requests": []}, "format_version 2 is not supported"),
    (
        {"requests": [{"arrival_s": -1, "prompt_tokens": 1, "output_tokens": 1}]},
        r"requests\[0\]\.arrival_s must be >= 0",
    ),
    (
        {
            "requests": [
                {"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1},
                {"arrival_s": 1, "prompt_tokens": 0, "output_tokens": 1},
            ]
        },
        r"requests\[1\]\.prompt_tokens must be >= 1",
    ),
    (
        {"requests": [{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 2.5}]},
        r"output_tokens must be an integer",
    ),
    ({"requests": [{"arrival_s": 0, "prompt_tokens": 1}]}, "missing field 'output_tokens'"),
    (
        {"requests": [{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1, "ouput": 3}]},
        r"requests\[0\]: unknown field 'ouput'",
    ),
    (
        {
            "requests": [
                {"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1, "workload": "chat"}
            ]
        },
        r"requests\[0\]\.workload: unknown workload 'chat'",
    ),
    (
        {"requests": [{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1, "acceptance": 1.0}]},
        "acceptance must be < 1.0",
    ),
    (
        {
            "requests": [
                {"arrival_s": 0, "prompt_tokens": 2, "prompt_token_ids": [1], "output_tokens": 1}
            ]
        },
        r"prompt_tokens 2 != len\(prompt_token_ids\) 1",
    ),
    (
        {"duration_s": 1, "requests": [{"arrival_s": 5, "prompt_tokens": 1, "output_tokens": 1}]},
        "before the last arrival",
    ),
    ({"workload": "nope", "segments": [{"duration_s": 1, "rate_rps": 1}]}, "unknown workload"),
    ({"segments": [{"duration_s": 0, "rate_rps": 1}]}, r"segments\[0\]\.duration_s must be > 0"),
    ({"segments": [{"duration_s": 5, "rate_rps": 1, "burstiness": 0}]},
     "burstiness must be >= 0.001"),
    ({"segments": [{"duration_s": 5, "rate": 1}]}, r"unknown field 'rate' \(did you mean"),
    ({"segments": [{"duration_s": 5, "rate_rps": 0}]}, "generate no requests"),
    ({"segments": [{"duration_s": 1e6, "rate_rps": 1e3}]}, "more than"),
    ({"seed": -1, "segments": [{"duration_s": 5, "rate_rps": 1}]}, "seed must be >= 0"),
    ({"seed": True, "segments": [{"duration_s": 5, "rate_rps": 1}]}, "seed must be an integer"),
]


@pytest.mark.parametrize(("obj", "message"), BAD_CASES)
def test_validation_errors_are_one_line_and_name_the_file(
    tmp_path: Path, obj: Any, message: str
) -> None:
    path = _write(tmp_path, obj)
    with pytest.raises(NightjarInputError, match=message) as info:
        load_trace(path)
    text = str(info.value)
    assert "\n" not in text and text.startswith(path)


def test_trace_invariants_checked_on_construction() -> None:
    one = np.ones(2, dtype=np.int64)
    kw: dict[str, Any] = {
        "name": "x",
        "seed": 0,
        "prompt_tokens": one,
        "output_tokens": one,
        "workload": np.array(["sharegpt"] * 2, dtype=object),
        "acceptance": np.full(2, np.nan),
    }
    with pytest.raises(ValueError, match="non-decreasing"):
        Trace(arrival_s=np.array([1.0, 0.5]), **kw)
    assert len(Trace(arrival_s=np.array([0.0, 0.5]), **kw)) == 2


def test_cli_gen_writes_loadable_trace_and_refuses_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    assert (
        _cli(
            [
                "trace",
                "gen",
                "--rate",
                "10",
                "--duration",
                "30",
                "--burstiness",
                "0.5",
                "--workload",
                "alpaca",
                "--seed",
                "2",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    t = load_trace(str(out))
    assert t.name == "g" and t.duration_s == 30.0 and set(t.workload) == {"alpaca"}
    assert len(t) / 30 == pytest.approx(10, rel=0.3)
    with pytest.raises(NightjarInputError, match="exists; pass --force"):
        _cli(["trace", "gen", "--rate", "1", "--duration", "5", "--out", str(out)])
    assert (
        _cli(
            [
                "trace",
                "gen",
                "--segments",
                "2:10,20:10:0.5",
                "--generative",
                "--force",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    spec = json.loads(out.read_text())
    assert spec["segments"][1] == {"duration_s": 10.0, "rate_rps": 20.0, "burstiness": 0.5}
    assert load_trace(str(out)).duration_s == 20.0


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rate", "1"], "needs --rate and --duration"),
        (["--segments", "2:10,x"], "--segments item 2 'x'"),
        (["--segments", "2:10", "--rate", "3"], "not both"),
        (["--rate", "-1", "--duration", "5"], "rate_rps must be >= 0"),
        (["--rate", "1", "--duration", "5", "--workload", "nope"], "unknown workload"),
    ],
)
def test_cli_gen_bad_flags(tmp_path: Path, argv: list[str], message: str) -> None:
    with pytest.raises(NightjarInputError, match=message):
        _cli(["trace", "gen", *argv, "--out", str(tmp_path / "x.json")])
    assert not (tmp_path / "x.json").exists()


def test_cli_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["trace", "show", "burst", "--window", "10"]) == 0
    out = capsys.readouterr().out
    assert f"{len(load_trace('burst'))} (seed" in out
    assert "inter-arrival CV" in out and any(c in out for c in "▁▂▃▄▅▆▇█")
