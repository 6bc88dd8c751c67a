"""What waits to be scheduled in a simulated engine: the FCFS queue, the tokens each
waiting request must prefill, and the trace's requests that have not arrived yet.

Invariants, kept on every push and pop so that a long queue costs nothing per step:

- ``tokens`` is the sum of ``pending[rid]`` over the queued requests, and
  ``preempted`` the number of them that are back after a preemption (they prefill
  their prompt plus what they had generated);
- requests arrive in trace order: ``next_arrival`` is the first that has not;
- ``rate_rps`` is the arrival rate over the last ``ARRIVAL_WINDOW_S`` as of the
  last :meth:`WaitingQueue.arrive` (``nightjar.core.arrivals``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from math import inf

from nightjar.core.arrivals import ARRIVAL_WINDOW_S


class WaitingQueue:
    def __init__(self, arrivals: list[float], prompt: list[int]) -> None:
        self.order: deque[int] = deque()
        self.arrivals = arrivals
        self.prompt = prompt
        # Tokens each waiting request must prefill, set when it joins the queue:
        # admission reads it lazily, request by request.
        self.pending: list[int] = [0] * len(prompt)
        self.tokens = 0
        self.preempted = 0
        self._requeued = [False] * len(prompt)
        self.next_arrival = 0
        self.rate_rps = 0.0
        self._window_start = 0  # first arrival inside the arrival-rate window

    def __len__(self) -> int:
        return len(self.order)

    def arrive(self, now: float) -> None:
        """Queue every request that has arrived by ``now``, and measure the rate.

        The window's start only moves forward (time does), so it is a pointer
        advanced past the arrivals at or before ``now - window``."""
        arrivals, prompt, pending, order = self.arrivals, self.prompt, self.pending, self.order
        n = len(arrivals)
        i = self.next_arrival
        while i < n and arrivals[i] <= now:
            order.append(i)
            pending[i] = prompt[i]
            self.tokens += prompt[i]
            i += 1
        self.next_arrival = i
        edge = now - ARRIVAL_WINDOW_S
        since = self._window_start
        while since < i and arrivals[since] <= edge:
            since += 1
        self._window_start = since
        self.rate_rps = (i - since) / ARRIVAL_WINDOW_S

    def next_arrival_s(self) -> float:
        """When the next request arrives (inf after the last)."""
        i = self.next_arrival
        return self.arrivals[i] if i < len(self.arrivals) else inf

    def requeue(self, rid: int, tokens: int) -> None:
        """A preempted request goes back to the head, to prefill ``tokens`` again."""
        self.order.appendleft(rid)
        self.pending[rid] = tokens
        self.tokens += tokens
        self.preempted += 1
        self._requeued[rid] = True

    def pop(self) -> int:
        """The head leaves the queue, admitted; returns its id (the tokens it
        prefills stay in ``pending``)."""
        rid = self.order.popleft()
        self.tokens -= self.pending[rid]
        if self._requeued[rid]:
            self._requeued[rid] = False
            self.preempted -= 1
        return rid

    def pending_tokens(self) -> Iterator[int]:
        """The tokens each queued request must prefill, head first."""
        return map(self.pending.__getitem__, self.order)
