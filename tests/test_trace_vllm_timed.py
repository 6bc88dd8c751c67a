"""The vLLM ``timed_trace`` export's shape (vLLM's own reader: tests/live)."""

from __future__ import annotations

import json

import pytest

from nightjar.trace.trace import load_trace
from nightjar.trace.vllm_timed import timed_trace_jsonl


def test_each_request_is_a_line_with_its_own_hash_ids_covering_its_prompt() -> None:
    trace = load_trace("live-spec-wins")
    rows = [json.loads(line) for line in timed_trace_jsonl(trace, chunk=16).splitlines()]
    assert len(rows) == len(trace) and rows[0]["timestamp"] == 0.0
    ids: list[int] = []
    for row, p, o in zip(rows, trace.prompt_tokens, trace.output_tokens, strict=True):
        assert (row["input_length"], row["output_length"]) == (p, o)
        assert len(row["hash_ids"]) == -(-int(p) // 16)  # the last chunk is cut to fit
        ids += row["hash_ids"]
    assert len(set(ids)) == len(ids)  # no prefix shared that the trace does not record
    times = [r["timestamp"] for r in rows]
    assert times == sorted(times)
    with pytest.raises(ValueError, match="chunk"):
        timed_trace_jsonl(trace, chunk=0)
