"""A dataset given where a trace is wanted names the import that converts it (issue 39)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.cli import main
from nightjar.errors import NightjarInputError
from nightjar.trace.sniff import import_for
from nightjar.trace.trace import load_trace, read_trace_source

DATASETS = {
    "sharegpt": ("d.json", json.dumps([{"id": "x", "conversations": [
        {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}])),
    "vllm": ("d.jsonl", '{"prompt": "a"}\n{"prompt": "b", "output_tokens": 3}\n'),
    "azure": ("d.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                       "2023-11-16 18:15:46.6805900,4808,10\n"),
    "burstgpt": ("b.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,"
                          "Log Type\n5,ChatGPT,472,18,490,Conversation log\n"),
    "vidur": ("v.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,100,20\n"),
}


@pytest.mark.parametrize("fmt", sorted(DATASETS))
def test_a_dataset_given_as_a_trace_names_its_import_and_the_import_reads_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    name, text = DATASETS[fmt]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(NightjarInputError, match=f"nightjar trace import {fmt} "):
        load_trace(str(path))
    assert main(["sim", "--trace", str(path), "--policy", "nospec",
                 "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"trace import {fmt}" in err[0]
    # ... and the command it names turns the file into a trace that runs.
    out = tmp_path / "t.json"
    assert main(["trace", "import", fmt, str(path), "--out", str(out)]) == 0
    assert len(load_trace(str(out))) >= 1


def test_every_bundled_trace_is_a_trace() -> None:
    from nightjar.trace.trace import bundled_traces

    for name in bundled_traces():
        assert import_for(read_trace_source(name)[1]) is None, name


def test_a_malformed_file_of_no_known_kind_is_still_malformed_json(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text("[1, 2", encoding="utf-8")
    with pytest.raises(NightjarInputError, match="malformed JSON"):
        load_trace(str(path))
