"""The admission rule both engines share (``nightjar.core.admission``): which waiting
prompts a V1 step takes, and the batch a step's K is priced at."""

from __future__ import annotations

from collections.abc import Iterator

from nightjar.core.admission import Limits, Room, admit, step_batch


def room(tokens: int, blocks: int = 10_000, seats: int = 256, slots: int = 0) -> Room:
    return Room(tokens=tokens, blocks=blocks, seats=seats, block_size=16, slot_tokens=slots)


def test_fcfs_until_the_budget_ends_with_a_partial_chunk() -> None:
    assert admit([100, 300, 500, 50], room(600)) == [100, 300, 200]
    assert admit([100, 300], room(1000)) == [100, 300]
    assert admit([100], room(0)) == []


def test_each_admitted_request_takes_its_draft_slot_from_the_budget() -> None:
    # 100 + 1, then what is left minus the slot: 600 - 101 - 1 = 498.
    assert admit([100, 800], room(600, slots=1)) == [100, 498]
    # A budget with only the slot left admits nothing more.
    assert admit([100, 5], room(101, slots=1)) == [100]


def test_free_blocks_and_seats_stop_admission() -> None:
    # 100 tokens + the sampled one = 7 blocks of 16; the second needs 7 more.
    assert admit([100, 100], room(5000, blocks=13)) == [100]
    assert admit([100, 100], room(5000, blocks=14)) == [100, 100]
    assert admit([10, 10, 10], room(5000, seats=2)) == [10, 10]
    assert admit([10], room(5000, seats=0)) == []


def test_whole_prompts_only_in_v0() -> None:
    assert admit([100, 800], room(600), whole=True) == [100]
    # The step's first prompt is taken whole even when larger than the budget.
    assert admit([3000, 10], room(1024), whole=True) == [3000]


def test_the_queue_is_read_only_as_far_as_admission_goes() -> None:
    read: list[int] = []

    def queue() -> Iterator[int]:
        for t in [500, 500, 500, 500]:
            read.append(t)
            yield t

    assert admit(queue(), room(700)) == [500, 200]
    assert len(read) == 3  # the third is looked at (no budget left), the fourth never


LIMITS = Limits(max_num_batched_tokens=2048, max_num_seqs=256, block_size=16)


def test_the_step_that_admitted_20_prompts_is_priced_at_21() -> None:
    # Issue 15's live step: one decode running, 20 short prompts waiting.
    # 2047 tokens left: ten whole prompts and a 47-token chunk of the eleventh.
    assert step_batch([1], [200] * 20, 10_000, LIMITS) == 1 + 11
    assert step_batch([1], [100] * 20, 10_000, LIMITS) == 21


def test_running_requests_are_served_first() -> None:
    # A partial prefill with 2000 tokens left leaves 2048 - 2 - 2000 = 46 for one more.
    assert step_batch([1, 1, 2000], [300, 300], 10_000, LIMITS) == 4
    # One that takes the whole budget starves admission (and the running one after it).
    assert step_batch([1, 5000, 1], [10], 10_000, LIMITS) == 3
    # Decodes verifying drafts (1 + K tokens) and draft slots take budget too.
    drafting = Limits(max_num_batched_tokens=64, max_num_seqs=256, block_size=16, draft_slots=1)
    # 64 - 10 x (4 + 1) = 14 left: 5 + 1, 5 + 1, then a 1-token chunk + 1.
    assert step_batch([4] * 10, [5] * 10, 10_000, drafting) == 10 + 3
    # A running request that sits this step out (async placeholders) takes nothing.
    assert step_batch([0, 1], [10], 10_000, LIMITS) == 3


def test_max_num_seqs_counts_the_running_requests() -> None:
    few = Limits(max_num_batched_tokens=2048, max_num_seqs=4, block_size=16)
    assert step_batch([1, 1, 1], [10, 10, 10], 10_000, few) == 4
    assert step_batch([], [10] * 9, 10_000, few) == 4
    assert step_batch([], [], 10_000, few) == 0
