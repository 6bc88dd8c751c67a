"""Which waiting prompts a vLLM V1 step admits, and the batch a step's K is priced at.

One rule for both engines (the simulator's admission and the live scheduler's
estimate of vLLM's), so that a policy sees the same batch in each: the running
requests are served first, each taking what it has left to compute this step (a
decode its one token, a partial prefill its next chunk) plus the budget's draft slot;
then waiting requests are admitted first come first served while the step's token
budget, the free KV blocks and ``max_num_seqs`` allow, the last one possibly only a
chunk of its prompt (chunked prefill). An admitted request needs blocks for its chunk
plus the token it will sample.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple


class Room(NamedTuple):
    """What is left of a step for waiting prompts (a tuple: the simulator builds two
    a step, and a frozen dataclass costs twice as much to build)."""

    tokens: int  # the step's token budget left after the running requests
    blocks: int  # free KV blocks
    seats: int  # requests that may still join (max_num_seqs - running)
    block_size: int
    # Budget tokens each admitted request also takes: vLLM V1 with a draft model
    # reserves one per scheduled request (max_num_new_slots_for_drafting).
    slot_tokens: int = 0


def admit(pending: Iterable[int], room: Room, *, whole: bool = False) -> list[int]:
    """Prompt tokens each admitted request prefills this step, in queue order.

    ``pending``: tokens each waiting request has left to prefill, FCFS (read lazily,
    so a long queue costs only what is admitted). ``whole`` (the V0 engine): only
    whole prompts, and a prompt larger than the whole budget is still taken when it
    is the step's first (vLLM V0 raises the budget to the model's length).
    """
    chunks: list[int] = []
    spent = 0
    free = room.blocks
    extra = room.slot_tokens
    bs = max(room.block_size, 1)
    for tokens in pending:
        if len(chunks) >= room.seats or spent + extra >= room.tokens:
            break
        take = tokens
        left = room.tokens - spent - extra
        if tokens > left:
            if whole and chunks:
                break
            take = tokens if whole else left
        need = -(-(take + 1) // bs)
        if need > free:
            break
        chunks.append(take)
        free -= need
        spent += take + extra
    return chunks


@dataclass(frozen=True, slots=True)
class Limits:
    """The scheduler's limits (vLLM's ``SchedulerConfig``)."""

    max_num_batched_tokens: int
    max_num_seqs: int
    block_size: int
    draft_slots: int = 0  # budget tokens per scheduled request while a draft is loaded


def step_batch(
    running_left: Iterable[int], pending: Iterable[int], free_blocks: int, limits: Limits,
    *, decodes: int = 0,
) -> int:
    """The requests a step runs: the running ones plus the waiting ones it admits.

    ``running_left``: the tokens each running request computes this step that are
    known before K is chosen (a decode: 1 plus the drafts it verifies, where the
    engine already has them; a partial prefill: the rest of its prompt), in the
    running queue's order; 0 or less for one that sits this step out. Admission
    happens only when every running request got its share of the budget, as in
    vLLM. This is the batch a K
    chosen now is priced at: the drafter proposes at the end of the step for every
    request in it, the admitted ones included.

    ``decodes``: that many running requests, ahead of ``running_left``, compute one
    token each (a decode whose drafts are not chosen yet), counted without a loop:
    the same as passing ``[1] * decodes`` in front.
    """
    budget = limits.max_num_batched_tokens
    slots = limits.draft_slots
    running = decodes
    # Each decode takes 1 + slots while budget - slots >= 1 is left for it; once one
    # is starved, every request after it is too (the budget only shrinks).
    fit = min(decodes, budget // (1 + slots)) if budget > 0 else 0
    budget -= fit * (1 + slots)
    starved = fit < decodes
    for left in running_left:
        running += 1
        if left <= 0:
            continue
        take = min(left, budget - slots)
        if take <= 0:
            starved = True
            continue
        budget -= take + slots
    seats = limits.max_num_seqs - running
    if starved or seats <= 0 or free_blocks <= 0 or slots >= budget:
        return running  # (no seat, block or token for a first prompt: admit() takes none)
    room = Room(
        tokens=budget,
        blocks=free_blocks,
        seats=seats,
        block_size=limits.block_size,
        slot_tokens=slots,
    )
    return running + len(admit(pending, room))
