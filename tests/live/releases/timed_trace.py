"""Reads a nightjar-exported ``timed_trace`` file with vLLM's own dataset loader.

Run by tests/live/test_vllm_timed_trace.py with a release's sources on PYTHONPATH:
``timed_trace.py FILE TOKENIZER_DIR`` prints the release's version and each sampled
request's (timestamp, prompt tokens, output tokens) as JSON.
"""

from __future__ import annotations

import json
import sys

import vllm
from transformers import AutoTokenizer
from vllm.benchmarks.datasets.datasets import TimedTrace

if __name__ == "__main__":
    path, model = sys.argv[1], sys.argv[2]
    labels = {"timestamp": "timestamp", "input_length": "input_length",
              "output_length": "output_length", "hash_ids": "hash_ids"}
    ds = TimedTrace(dataset_path=path, random_seed=0, timed_trace_chunk_hash_size=16,
                    timed_trace_sec_multiplier=1.0,
                    **{f"timed_trace_label_{k}": v for k, v in labels.items()})
    sampled = ds.sample(AutoTokenizer.from_pretrained(model), 10**9)
    print(json.dumps({"vllm": vllm.__version__, "rows": [
        [r.timestamp, r.prompt_len, r.expected_output_len] for r in sampled]}))
