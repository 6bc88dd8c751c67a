"""Decode windows that share one prefill: a ladder of batch sizes at one context.

A decode window of B requests at mean context c prefills B prompts first; at long
contexts that prefill is most of the profile's time (64 x 496 tokens at c = 512 take
~40 s on the 2-core CPU engine, the 32 decode steps after it ~5 s). A ladder submits
the largest batch once and lets it shrink: requests in group j (``B_j - B_{j+1}`` of
them) stop after ``(j + 1) * tokens`` output tokens, so the engine decodes B_0
requests for ``tokens`` steps, then B_1, and so on, each rung a batch the grid asks
for. Prompt lengths differ by group so that every rung's *mean* context is c at its
midpoint, the quantity the profile's decode table is keyed on (and the simulator
prices a step at). A halving ladder 64, 32, ..., 1 prefills ``64 (c - tokens / 2)``
tokens, what the B = 64 window alone did, where seven windows prefilled 127 prompts.

Invariant (``ladder_prompts``): with ``n_j`` requests in group j of prompt ``p_j``,
for every rung k, ``sum_{j >= k} n_j (p_j + k tokens + tokens / 2) = B_k c`` up to
rounding each ``p_j`` to a whole token.
"""

from __future__ import annotations

# A group's prompt must be at least this long (and its requests fit the model).
MIN_PROMPT = 1


def _group_sizes(rungs: tuple[int, ...]) -> list[int]:
    """Requests in each group: those that leave after rung j."""
    return [b - nxt for b, nxt in zip(rungs, (*rungs[1:], 0), strict=True)]


def ladder_prompts(rungs: tuple[int, ...], context: int, tokens: int) -> list[int] | None:
    """Prompt length per group (``len(rungs)`` of them, group j stopping after rung j)
    so that each rung's mean context is ``context``; None when some group's prompt
    would be shorter than ``MIN_PROMPT``. ``rungs`` strictly decreasing, > 0."""
    k_last = len(rungs) - 1
    sizes = _group_sizes(rungs)
    exact = [0.0] * len(rungs)
    for k in range(k_last, -1, -1):
        mid = tokens * k + tokens / 2
        later = sum(sizes[j] * (exact[j] + mid) for j in range(k + 1, len(rungs)))
        exact[k] = (rungs[k] * context - later) / sizes[k] - mid
    prompts = [round(p) for p in exact]
    return prompts if min(prompts) >= MIN_PROMPT else None


def chains(batch_sizes: tuple[int, ...], context: int, tokens: int, longest: int
           ) -> list[tuple[int, ...]]:
    """The batch sizes at ``context`` split into ladders, largest first: each the
    longest run of the next sizes down whose prompts are feasible and whose longest
    request (``prompt + rungs * tokens``) fits ``longest`` tokens. A one-rung ladder
    is the plain window (prompt ``context - tokens / 2``)."""
    todo = sorted(batch_sizes, reverse=True)
    out: list[tuple[int, ...]] = []
    while todo:
        take = 1
        for k in range(len(todo), 1, -1):
            rungs = tuple(todo[:k])
            prompts = ladder_prompts(rungs, context, tokens)
            if prompts is not None and max(
                p + (j + 1) * tokens for j, p in enumerate(prompts)
            ) <= longest:
                take = k
                break
        out.append(tuple(todo[:take]))
        todo = todo[take:]
    return out


def requests(rungs: tuple[int, ...], context: int, tokens: int) -> list[tuple[int, int]]:
    """(prompt tokens, output tokens) of each request of a ladder, group 0 first."""
    prompts = ladder_prompts(rungs, context, tokens)
    if prompts is None:
        raise ValueError(f"no ladder {rungs} at context {context} with {tokens} tokens a rung")
    out: list[tuple[int, int]] = []
    for j, (p, n) in enumerate(zip(prompts, _group_sizes(rungs), strict=True)):
        out += [(p, (j + 1) * tokens)] * n
    return out
