"""What of a trace a live run replays, and whether its prompts fit the target."""

from __future__ import annotations

import dataclasses

from nightjar.errors import NightjarInputError
from nightjar.trace.trace import Trace


def first_requests(trace: Trace, n: int) -> Trace:
    """``--max-requests N``: the first ``n`` requests; the replay ends at the last kept
    arrival (the trace's own span is dropped, all requests kept or not)."""
    if n < 1:
        raise NightjarInputError(f"--max-requests must be >= 1, got {n}")
    return trace.head(n) if n < len(trace) else dataclasses.replace(trace, span_s=None)


def check_token_ids(trace: Trace, vocab: int, trace_arg: str) -> None:
    """Refuse a trace whose token-id prompts reach past the target's vocabulary."""
    ids = [max(p) for p in (trace.prompts or []) if isinstance(p, list) and p]
    if ids and max(ids) >= vocab:
        raise NightjarInputError(
            f"--trace {trace_arg}: a prompt holds token id {max(ids)}, beyond the target's "
            f"vocabulary ({vocab} tokens)")
