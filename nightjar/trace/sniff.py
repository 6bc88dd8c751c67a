"""What a file given as a trace is when it is not one: the import that reads it.

A user hands ``--trace`` the dataset they have (a ShareGPT JSON, an Azure CSV): the
error should name the command that turns it into a trace, not "malformed JSON".
Judged from the file's start only, so a large dataset is not parsed to be refused.
"""

from __future__ import annotations

import re

# (the import's name, a test on the text's first few kilobytes)
_HEAD = 4096
_CSV_HEADERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("azure", ("TIMESTAMP", "ContextTokens", "GeneratedTokens")),
    ("burstgpt", ("Timestamp", "Request tokens", "Response tokens")),
    ("vidur", ("num_prefill_tokens", "num_decode_tokens")),
)
_NAMES = {"sharegpt": "a ShareGPT dataset", "vllm": "a vLLM bench dataset (JSON Lines)",
          "azure": "an Azure LLM inference trace", "burstgpt": "a BurstGPT trace",
          "vidur": "a Vidur request trace"}
_SHAREGPT = re.compile(r'^\s*\[\s*\{.*"conversations"\s*:', re.DOTALL)
_VLLM_JSONL = re.compile(r'^\s*\{[^\n]*"prompt"\s*:[^\n]*\}\s*\n\s*\{')


def import_for(text: str) -> str | None:
    """The ``nightjar trace import`` format ``text`` looks like, or None."""
    head = text[:_HEAD]
    if _SHAREGPT.match(head):
        return "sharegpt"
    if _VLLM_JSONL.match(head):
        return "vllm"
    first = head.split("\n", 1)[0]
    columns = {c.strip().strip('"') for c in first.split(",")}
    for name, needed in _CSV_HEADERS:
        if all(c in columns for c in needed):
            return name
    return None


def import_hint(label: str, text: str) -> str | None:
    """One line for a file that is a dataset rather than a trace; None otherwise."""
    fmt = import_for(text)
    if fmt is None:
        return None
    return (f"{label} looks like {_NAMES[fmt]}, not a Nightjar trace: convert it with "
            f"`nightjar trace import {fmt} {label} --out TRACE.json`, then pass TRACE.json")
