"""The block pool's edge cases: admission, growth, preemption, freeing, reclaim."""

import pytest

from nightjar.sim.kv import BlockPool


def test_allocate_and_release_round_trip() -> None:
    pool = BlockPool(10)
    pool.allocate(10)
    assert pool.free == 0
    pool.release(4)
    assert (pool.used, pool.free) == (6, 4)


def test_over_allocation_and_over_release_are_bugs() -> None:
    pool = BlockPool(4)
    with pytest.raises(RuntimeError):
        pool.allocate(5)
    pool.allocate(2)
    with pytest.raises(RuntimeError):
        pool.release(3)


def test_empty_pool_is_rejected() -> None:
    with pytest.raises(ValueError):
        BlockPool(0)


def test_drain_withholds_blocks_until_they_are_free() -> None:
    pool = BlockPool(10)
    pool.allocate(8)
    pool.start_reclaim(5)
    assert pool.free == 0  # promised blocks are not handed out again
    assert pool.reclaim_shortfall() == 3
    assert not pool.try_finish_reclaim()
    pool.release(3)
    assert pool.try_finish_reclaim()
    assert (pool.total, pool.used, pool.free) == (5, 5, 0)


def test_grow_adds_capacity() -> None:
    pool = BlockPool(5)
    pool.allocate(5)
    pool.grow(3)
    assert pool.free == 3
