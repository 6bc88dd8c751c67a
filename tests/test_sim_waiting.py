"""The simulator's waiting queue keeps its running sums true through arrivals,
admissions and preemptions, and measures the arrival rate over its window."""

from __future__ import annotations

from math import inf

import pytest

from nightjar.core.arrivals import ARRIVAL_WINDOW_S
from nightjar.sim.waiting import WaitingQueue


def _sums_hold(q: WaitingQueue, preempted: set[int]) -> None:
    assert q.tokens == sum(q.pending[rid] for rid in q.order)
    assert q.preempted == len(preempted & set(q.order))
    assert list(q.pending_tokens()) == [q.pending[rid] for rid in q.order]


def test_arrivals_join_in_trace_order_up_to_now() -> None:
    q = WaitingQueue([0.0, 1.0, 1.0, 5.0], [10, 20, 30, 40])
    q.arrive(0.5)
    assert list(q.order) == [0] and q.tokens == 10 and q.next_arrival_s() == 1.0
    q.arrive(1.0)  # an arrival at exactly now has arrived
    assert list(q.order) == [0, 1, 2] and q.tokens == 60
    q.arrive(10.0)
    assert len(q) == 4 and q.next_arrival_s() == inf
    _sums_hold(q, set())


def test_admission_and_preemption_keep_the_sums() -> None:
    q = WaitingQueue([0.0, 0.0, 0.0], [10, 20, 30])
    q.arrive(0.0)
    assert q.pop() == 0 and q.pop() == 1
    _sums_hold(q, set())
    q.requeue(1, 20 + 7)  # preempted after generating 7 tokens: it prefills them too
    q.requeue(0, 10 + 3)
    assert list(q.order) == [0, 1, 2] and q.preempted == 2
    _sums_hold(q, {0, 1})
    assert q.pop() == 0 and q.preempted == 1 and q.tokens == 27 + 30
    assert q.pop() == 1 and q.pop() == 2
    assert len(q) == 0 and q.tokens == 0 and q.preempted == 0
    # Admitted again after its preemption, a request is no longer counted as one.
    q.requeue(2, 31)
    assert q.preempted == 1 and q.pop() == 2 and q.preempted == 0


def test_the_rate_counts_the_arrivals_inside_the_window() -> None:
    arrivals = [0.0, 1.0, 2.0, 2.0 + ARRIVAL_WINDOW_S, 3.0 + ARRIVAL_WINDOW_S]
    q = WaitingQueue(arrivals, [1] * len(arrivals))
    q.arrive(2.0)
    assert q.rate_rps == pytest.approx(3 / ARRIVAL_WINDOW_S)
    q.arrive(2.0 + ARRIVAL_WINDOW_S)  # 0.0, 1.0 and 2.0 are at or past the edge
    assert q.rate_rps == pytest.approx(1 / ARRIVAL_WINDOW_S)
    q.arrive(100.0 * ARRIVAL_WINDOW_S)
    assert q.rate_rps == 0.0
