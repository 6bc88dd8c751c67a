"""Prefill time for any number of tokens, from a profile's bounded prefill table.

Both engines price work with it: the simulator every prefill and draft catch-up, and
both the reload-cost estimate the memory controller's early reload weighs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nightjar.profile.profile import Profile

# Tokens of draft KV a reload is expected to rebuild, for the reload-cost estimate: a
# few requests' worth of context, the order of what a batch holds when load drops.
REBUILD_TOKENS = 4096


def chunked_prefill_s(time_s: Callable[[int], float], tokens: int, chunk: int) -> float:
    """Prefill ``tokens`` as consecutive chunks of at most ``chunk`` tokens.

    ``chunk`` is the profile's largest measured prefill: beyond it the work is priced
    as chunked prefill would run it (full chunks plus a remainder), never by
    extrapolating the table.
    """
    full, rest = divmod(tokens, chunk)
    return full * time_s(chunk) + (time_s(rest) if rest else 0.0)


def reload_cost_s(profile: Profile) -> float:
    """What a draft reload costs in service seconds: rebuilding its KV cache.

    The weight transfer itself overlaps compute (host link, side stream), so only the
    draft's prefill over :data:`REBUILD_TOKENS` is counted.
    """
    return chunked_prefill_s(
        profile.draft_prefill_time_s, REBUILD_TOKENS, profile.max_prefill_tokens
    )
