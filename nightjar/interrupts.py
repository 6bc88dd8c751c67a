"""SIGTERM and SIGHUP end a run the way Ctrl-C does: through the cleanup code.

``kill``, ``timeout``, a container stop and a batch scheduler send SIGTERM; closing the
terminal sends SIGHUP. Python's default for both is to die on the spot, skipping every
``finally``: a staged output folder would stay behind as ``.DIR.nightjar-tmp-*``. Inside
:func:`signals_as_interrupts` they raise :class:`Interrupted` (a ``KeyboardInterrupt``)
instead, so whatever cleans up after Ctrl-C cleans up after them too, and the command
exits with ``128 + signal``, as a shell reports a process the signal killed.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None))
                if s is not None)


class Interrupted(KeyboardInterrupt):
    """A run stopped by a signal; ``signum`` says which."""

    def __init__(self, signum: int) -> None:
        # args is (signum,): code that re-raises a copy (simpy: type(e)(*e.args)) keeps it.
        super().__init__(signum)
        self.signum = int(signum)

    def __str__(self) -> str:
        return signal.Signals(self.signum).name


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


@contextmanager
def signals_as_interrupts() -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP raise :class:`Interrupted`.

    Only where the signal still has its default action, and only in the main thread
    (the only one Python delivers signals to): a program that installed its own
    handler keeps it, and nested blocks are harmless.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for signum in SIGNALS:
        if signal.getsignal(signum) == signal.SIG_DFL:
            previous[signum] = signal.signal(signum, _raise)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT, SIGTERM and SIGHUP back while the block runs (a few renames that must
    happen together); they are delivered when it ends."""
    held = {signal.SIGINT, *SIGNALS}
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def default_signals_in_child() -> None:
    """For forked workers: the parent's handlers (which raise) are not theirs."""
    for signum in SIGNALS:
        signal.signal(signum, signal.SIG_DFL)
