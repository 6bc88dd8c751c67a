"""Azure CSV and ShareGPT-style dataset import, through the API and the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nightjar.cli import _Parser
from nightjar.commands import trace as trace_cmd
from nightjar.errors import NightjarInputError
from nightjar.trace.importers import estimate_tokens, import_azure_csv, import_sharegpt
from nightjar.trace.trace import interarrival_cv, load_trace

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:50.9951690,879,0
2023-11-16 18:15:51.2500000,1000,5
2023-11-16 18:16:10.0000000,12,34
"""


def _cli(argv: list[str]) -> int:
    parser = _Parser(prog="nightjar")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    trace_cmd.add_parser(sub)
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


def _csv(tmp_path: Path, text: str = AZURE) -> Path:
    p = tmp_path / "azure_conv.csv"
    p.write_text(text)
    return p


def test_azure_round_trip_through_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "az.json"
    assert _cli(["trace", "import", "azure", str(_csv(tmp_path)), "--out", str(out)]) == 0
    assert "skipped 1 (1 with zero ContextTokens" in capsys.readouterr().out
    t = load_trace(str(out))
    assert t.name == "azure_conv"
    assert t.arrival_s == pytest.approx([0.0, 4.314579, 4.569410, 23.319410])
    assert t.prompt_tokens.tolist() == [374, 396, 1000, 12]
    assert t.output_tokens.tolist() == [44, 109, 5, 34]
    assert np.isnan(t.acceptance).all() and t.prompts is None


def test_azure_window_and_limit(tmp_path: Path) -> None:
    t, rep = import_azure_csv(_csv(tmp_path), start_s=4.0, duration_s=10.0)
    # Rows at 4.31 and 4.57 s are in [4, 14); time is re-based to the window start.
    assert t.arrival_s == pytest.approx([0.314579, 0.569410])
    assert rep.kept == 2 and rep.skipped == 1
    t, rep = import_azure_csv(_csv(tmp_path), limit=2)
    assert len(t) == 2 and t.prompt_tokens.tolist() == [374, 396]


def test_azure_accepts_numeric_seconds_and_extra_columns(tmp_path: Path) -> None:
    p = _csv(tmp_path, "Id,TIMESTAMP,ContextTokens,GeneratedTokens\na,10.5,3,4\nb,12,5,6\n")
    t, _ = import_azure_csv(p)
    assert t.arrival_s.tolist() == [0.0, 1.5] and t.output_tokens.tolist() == [4, 6]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty CSV"),
        ("TIMESTAMP,ContextTokens\n1,2\n", "line 1: missing column.*GeneratedTokens"),
        (AZURE + "2023-11-16 18:16:11,abc,3\n", "line 7: ContextTokens 'abc' is not an integer"),
        (AZURE + "yesterday,3,3\n", "line 7: TIMESTAMP 'yesterday' is not a datetime"),
        (AZURE + "2023-11-16 18:16:11,3\n", "line 7: expected 3 fields, got 2"),
        (AZURE + "2023-11-16 18:16:11,3,-4\n",
         "line 7: GeneratedTokens must be in 0..1099511627776"),
        (AZURE + "2023-11-16 18:00:00,3,4\n", "line 7: TIMESTAMP is earlier than the first row"),
        ("TIMESTAMP,ContextTokens,GeneratedTokens\n1,0,0\n", "no usable requests"),
    ],
)
def test_azure_malformed_rows_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(NightjarInputError, match=message) as info:
        import_azure_csv(_csv(tmp_path, text))
    assert "\n" not in str(info.value)


def _sharegpt(tmp_path: Path, data: Any) -> Path:
    p = tmp_path / "sg.json"
    p.write_text(json.dumps(data))
    return p


CONVS = [
    {
        "id": "a",
        "conversations": [
            {"from": "human", "value": "Hello there, how are you?"},
            {"from": "gpt", "value": "a " * 40},
        ],
    },
    {"id": "b", "conversations": [{"from": "gpt", "value": "orphan reply"}]},
    {
        "id": "c",
        "conversations": [
            {"from": "system", "value": "be nice"},
            {"from": "user", "value": "写一首诗"},
            {"from": "assistant", "value": "好的"},
        ],
    },
] + [
    {"conversations": [{"from": "human", "value": f"q{i}"}, {"from": "gpt", "value": "a"}]}
    for i in range(400)
]


def test_sharegpt_import_prompts_lengths_and_rate(tmp_path: Path) -> None:
    t, rep = import_sharegpt(_sharegpt(tmp_path, CONVS), rate_rps=4.0, seed=1)
    assert rep.kept == 402 and rep.skipped == 1
    assert t.prompts is not None and t.prompts[:2] == ["Hello there, how are you?", "写一首诗"]
    assert t.prompt_tokens[0] == estimate_tokens("Hello there, how are you?")
    assert t.output_tokens[0] == 40  # 40 words beat 80 bytes / 4
    assert t.prompt_tokens[1] == 3  # 12 UTF-8 bytes: CJK counts about a token a char
    assert t.arrival_s[0] == 0.0
    assert len(t) / t.duration_s == pytest.approx(4.0, rel=0.15)
    assert interarrival_cv(t) == pytest.approx(1.0, rel=0.15)
    again, _ = import_sharegpt(_sharegpt(tmp_path, CONVS), rate_rps=4.0, seed=1)
    assert np.array_equal(again.arrival_s, t.arrival_s)


def test_sharegpt_cli_limit_inf_rate_and_no_prompts(tmp_path: Path) -> None:
    out = tmp_path / "sg_trace.json"
    assert (
        _cli(
            [
                "trace",
                "import",
                "sharegpt",
                str(_sharegpt(tmp_path, CONVS)),
                "--limit",
                "5",
                "--no-prompts",
                "--workload",
                "alpaca",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    t = load_trace(str(out))
    assert len(t) == 5 and (t.arrival_s == 0).all() and t.prompts is None
    assert set(t.workload) == {"alpaca"}
    assert (
        _cli(
            [
                "trace",
                "import",
                "sharegpt",
                str(_sharegpt(tmp_path, CONVS)),
                "--limit",
                "3",
                "--rate",
                "2",
                "--force",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert load_trace(str(out)).prompts == ["Hello there, how are you?", "写一首诗", "q0"]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"conversations": []}, "expected a JSON list"),
        ([{"convs": []}], r"\[0\]: expected an object with a 'conversations' list"),
        ([{"conversations": [{"from": "human"}]}], r"\[0\]\.conversations\[0\]: expected"),
        ([{"conversations": [{"from": "human", "value": "hi"}]}], "no usable requests"),
    ],
)
def test_sharegpt_malformed(tmp_path: Path, data: Any, message: str) -> None:
    with pytest.raises(NightjarInputError, match=message):
        import_sharegpt(_sharegpt(tmp_path, data), rate_rps=1.0)


def test_sharegpt_bad_rate_and_json(tmp_path: Path) -> None:
    with pytest.raises(NightjarInputError, match="--rate must be > 0"):
        import_sharegpt(_sharegpt(tmp_path, CONVS), rate_rps=0.0)
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    with pytest.raises(NightjarInputError, match="malformed JSON at line 1"):
        import_sharegpt(bad, rate_rps=1.0)
    with pytest.raises(NightjarInputError, match="needs the 'transformers' package"):
        _cli(
            [
                "trace",
                "import",
                "sharegpt",
                str(bad),
                "--tokenizer",
                "/nope",
                "--out",
                str(tmp_path / "o.json"),
            ]
        )


def test_azure_counts_rows_with_nan_or_inf_timestamps(tmp_path: Path) -> None:
    # Issue #13 problem 7: such rows were dropped without a word.
    path = tmp_path / "nan.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\nnan,10,10\n1.0,10,10\n"
                    "inf,10,10\n2.5,0,10\n3.0,20,5\n")
    trace, report = import_azure_csv(path)
    assert len(trace) == report.kept == 2
    assert report.skipped == 3
    assert report.reason == (
        "1 with zero ContextTokens or GeneratedTokens; 2 with a NaN or infinite TIMESTAMP"
    )
    assert trace.arrival_s.tolist() == [0.0, 2.0]  # the first finite row is time 0
