"""Vidur, vLLM custom-JSONL and BurstGPT traces; export to Vidur; ``trace list``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nightjar.cli import main
from nightjar.trace.tool_formats import (
    export_vidur_csv,
    import_burstgpt_csv,
    import_vidur_csv,
    import_vllm_jsonl,
)
from nightjar.trace.trace import bundled_traces, load_trace


def test_vidur_export_then_import_round_trips(tmp_path: Path) -> None:
    trace = load_trace("alpaca-burst")
    path = export_vidur_csv(trace, tmp_path / "t.csv")
    assert path.read_text().splitlines()[0] == "arrived_at,num_prefill_tokens,num_decode_tokens"
    back, report = import_vidur_csv(path)
    assert report.kept == len(trace) and report.skipped == 0
    np.testing.assert_allclose(back.arrival_s, trace.arrival_s, atol=1e-6)
    np.testing.assert_array_equal(back.prompt_tokens, trace.prompt_tokens)
    np.testing.assert_array_equal(back.output_tokens, trace.output_tokens)


def test_vidur_extra_columns_and_order(tmp_path: Path) -> None:
    path = tmp_path / "v.csv"
    path.write_text("num_total_tokens,arrived_at,num_prefill_tokens,num_decode_tokens\n"
                    "30,2.5,20,10\n9,0.5,5,4\n1,1.0,1,0\n")
    trace, report = import_vidur_csv(path)
    assert trace.arrival_s.tolist() == [0.5, 2.5] and trace.prompt_tokens.tolist() == [5, 20]
    assert report.skipped == 1


def test_burstgpt_skips_failures_and_filters_by_model(tmp_path: Path) -> None:
    path = tmp_path / "b.csv"
    path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "10,ChatGPT,100,0,100,Conversation log\n"
                    "12,GPT-4,30,40,70,API log\n"
                    "15,ChatGPT,50,60,110,Conversation log\n")
    trace, report = import_burstgpt_csv(path)
    assert trace.arrival_s.tolist() == [2.0, 5.0] and report.skipped == 1
    gpt4, _ = import_burstgpt_csv(path, model="GPT-4")
    assert gpt4.prompt_tokens.tolist() == [30] and gpt4.output_tokens.tolist() == [40]
    window, _ = import_burstgpt_csv(path, start_s=3.0)
    assert window.arrival_s.tolist() == [2.0]


def test_vllm_jsonl_lengths_and_arrivals(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "one two three four"}\n\n{"prompt": "hi", "output_tokens": 7}\n')
    trace, report = import_vllm_jsonl(path, rate_rps=2.0, seed=1)
    assert report.kept == 2
    assert trace.output_tokens.tolist() == [256, 7]  # vLLM's --custom-output-len default
    assert trace.prompts == ["one two three four", "hi"]
    assert trace.arrival_s[0] == 0.0 and trace.arrival_s[1] > 0
    burst, _ = import_vllm_jsonl(path, rate_rps=float("inf"), output_len=32)
    assert burst.arrival_s.tolist() == [0.0, 0.0] and burst.output_tokens.tolist() == [32, 7]


@pytest.mark.parametrize(
    ("kind", "name", "text", "message"),
    [
        ("vidur", "v.csv", "arrived_at,num_prefill_tokens\n0,1\n",
         "line 1: missing column(s) num_decode_tokens"),
        ("vidur", "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,abc,3\n",
         "line 2: num_prefill_tokens 'abc' is not a number"),
        ("vidur", "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n-1,2,3\n",
         "line 2: arrived_at must be a finite number >= 0"),
        ("vidur", "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,2.5,3\n",
         "line 2: num_prefill_tokens '2.5' is not an integer"),
        ("vidur", "v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,2\n",
         "line 2: expected 3 fields, got 2"),
        ("vidur", "v.csv", "", "empty CSV"),
        ("burstgpt", "b.csv", "Timestamp,Request tokens,Response tokens\n5,1,1\n3,1,1\n",
         "line 3: Timestamp is earlier than the first row"),
        ("burstgpt", "b.csv", "Timestamp,Request tokens,Response tokens\n5,0,0\n",
         "no usable requests"),
        ("vllm", "d.jsonl", '{"prompt": "a"}\n{"prompt": \n', "line 2: malformed JSON"),
        ("vllm", "d.jsonl", '{"text": "a"}\n', "line 1: expected an object with a 'prompt'"),
        ("vllm", "d.jsonl", '{"prompt": "a", "output_tokens": 0}\n',
         "line 1: output_tokens must be an integer in 1.."),
        ("vllm", "d.jsonl", "", "not UTF-8 text"),
    ],
)
def test_malformed_files_are_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, name: str, text: str,
    message: str,
) -> None:
    path = tmp_path / name
    if kind == "vllm" and message == "not UTF-8 text":
        path.write_bytes(b"\xff\xfe\x00")
    else:
        path.write_text(text)
    code = main(["trace", "import", kind, str(path), "--out", str(tmp_path / "o.json")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1, err
    assert not (tmp_path / "o.json").exists()


def test_cli_import_export_and_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    csv = tmp_path / "steady.csv"
    assert main(["trace", "export", "steady", "--out", str(csv)]) == 0
    assert main(["trace", "export", "steady", "--out", str(csv)]) == 2  # never overwrite
    assert "pass --force" in capsys.readouterr().err
    out = tmp_path / "steady.json"
    assert main(["trace", "import", "vidur", str(csv), "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert len(doc["requests"]) == len(load_trace("steady"))
    # The imported trace simulates like any other.
    assert main(["sim", "--trace", str(out), "--policy", "nospec", "--no-oracle", "--quiet",
                 "--out", str(tmp_path / "run"), "--no-report"]) == 0
    capsys.readouterr()
    assert main(["trace", "list"]) == 0
    listing = capsys.readouterr().out
    assert all(name in listing for name in bundled_traces())
