"""A guard that turns a hang into a test failure (issue #13: runs that never ended)."""

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType


@contextmanager
def fails_after(seconds: float) -> Iterator[None]:
    """Raise TimeoutError in the block if it runs longer than ``seconds`` (main thread)."""

    def _raise(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"still running after {seconds} s: the simulation hangs")

    old = signal.signal(signal.SIGALRM, _raise)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
