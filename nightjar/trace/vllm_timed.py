"""A trace as vLLM's ``timed_trace`` benchmark dataset, so that the requests a
simulation ran can be replayed against a real server at the same times:

    vllm bench serve --dataset-name timed_trace --dataset-path F.jsonl \\
        --num-prompts N --ignore-eos

One JSON object per line, vLLM's default labels: ``timestamp`` (seconds from the
trace's first arrival), ``input_length``, ``output_length`` and ``hash_ids``. vLLM
builds each prompt from its hash ids, ``chunk`` tokens per id (the last chunk cut to
the length), and equal ids give equal tokens; a nightjar trace records no shared
prefixes, so every request's ids are its own (no prefix-cache hits that the
simulation did not have). ``--ignore-eos`` makes each request emit its
``output_length`` tokens, as the simulation does.
"""

from __future__ import annotations

import json

from nightjar.trace.trace import Trace

# vLLM's --timed-trace-chunk-hash-size default.
VLLM_CHUNK = 16


def timed_trace_jsonl(trace: Trace, chunk: int = VLLM_CHUNK) -> str:
    """``trace`` as vLLM ``timed_trace`` JSONL; ``chunk`` tokens per hash id."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    start = float(trace.arrival_s.min()) if len(trace) else 0.0
    lines = []
    next_id = 0
    for t, p, o in zip(trace.arrival_s.tolist(), trace.prompt_tokens.tolist(),
                       trace.output_tokens.tolist(), strict=True):
        n = -(-int(p) // chunk)
        row = {"timestamp": round(t - start, 6), "input_length": int(p),
               "output_length": int(o), "hash_ids": list(range(next_id, next_id + n))}
        next_id += n
        lines.append(json.dumps(row, separators=(",", ":")))
    return "".join(line + "\n" for line in lines)
