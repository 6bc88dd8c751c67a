"""Prefill time for any number of tokens, from a profile's bounded prefill table."""

from __future__ import annotations

from collections.abc import Callable


def chunked_prefill_s(time_s: Callable[[int], float], tokens: int, chunk: int) -> float:
    """Prefill ``tokens`` as consecutive chunks of at most ``chunk`` tokens.

    ``chunk`` is the profile's largest measured prefill: beyond it the work is priced
    as chunked prefill would run it (full chunks plus a remainder), never by
    extrapolating the table.
    """
    full, rest = divmod(tokens, chunk)
    return full * time_s(chunk) + (time_s(rest) if rest else 0.0)
