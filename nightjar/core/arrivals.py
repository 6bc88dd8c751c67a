"""The recent request arrival rate both engines report in ``StepContext.arrival_rate_rps``.

Definition (the same in the simulator and live): requests that arrived in the last
``ARRIVAL_WINDOW_S`` seconds, divided by ``ARRIVAL_WINDOW_S``. A fixed divisor keeps
the two engines identical; the price is that the first window of a run reads low
(e.g. 1 req/s after 5 s of a steady 2 req/s). The published Nightjar code gates
speculation on ``arrival rate > 2 req/s``; ten seconds holds ~20 arrivals at that
rate, enough that a single burst of a few requests does not trip the gate.
"""

from __future__ import annotations

from collections import deque

ARRIVAL_WINDOW_S = 10.0


class ArrivalRate:
    """Arrival times in a sliding window; for engines that see requests one by one."""

    def __init__(self, window_s: float = ARRIVAL_WINDOW_S) -> None:
        self.window_s = window_s
        self._times: deque[float] = deque()

    def record(self, t: float) -> None:
        self._times.append(t)

    def rate(self, now: float) -> float:
        times = self._times
        while times and times[0] <= now - self.window_s:
            times.popleft()
        return len(times) / self.window_s
