"""Runs vLLM's server as a supervised child: one orderly shutdown per stop, no orphans.

A signal to vLLM's whole process group (a terminal's Ctrl-C) races vLLM's own
teardown: the engine core starts tearing down on its SIGINT, resets its handlers, and
is then killed by the SIGTERM its API server sends it, before it unlinks its
shared-memory queues ("resource_tracker: ... leaked shared_memory objects"); its
workers lose their parent mid-step. So the server runs in a session of its own, and
Nightjar forwards a stop to the API server alone, which stops its engine in order.
A second stop kills the server's group at once; so does one that outlives the grace.
If Nightjar itself is killed, the kernel sends the server SIGTERM (``PR_SET_PDEATHSIG``).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from types import FrameType

# Seconds the server gets to stop after a forwarded signal: its engine core gets 30 s
# (nightjar.live.prometheus), and inside them its workers 20 s.
SERVER_GRACE_S = 60.0
# Seconds the rest of the server's group gets to exit after the server has.
REAP_S = 10.0
_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def _group_gone(proc: subprocess.Popen[bytes], wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)


def run_supervised(argv: list[str], env: dict[str, str]) -> int:
    """Run ``argv`` until it exits; returns its exit code, or 128 + the stop signal."""
    proc = subprocess.Popen(argv, env=env, start_new_session=True, preexec_fn=_die_with_parent)
    stopped: list[int] = []
    since = 0.0

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal since
        if stopped:
            _kill_group(proc)  # asked twice: no more waiting
            return
        stopped.append(signum)
        since = time.monotonic()
        proc.send_signal(signal.SIGINT)

    previous = {s: signal.signal(s, stop) for s in _STOPS}
    try:
        while True:
            try:
                code = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stopped and time.monotonic() - since > SERVER_GRACE_S:
                    _kill_group(proc)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        # What is left of the server's group (its resource tracker finishing, or the
        # engine of a server that was killed) gets a moment, then is killed: nothing
        # outlives ``nightjar live --serve``.
        if not _group_gone(proc, REAP_S):
            _kill_group(proc)
    return 128 + stopped[0] if stopped else code
