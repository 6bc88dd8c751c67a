"""Stopping a server that runs in its own process group (``nightjar live --serve``).

The server gets one SIGINT, as ``kill -INT PID`` sends, and stops its engine core and
workers itself, in order, so that each unlinks its shared memory and releases its
port: a SIGINT to the whole group races that teardown (nightjar.live.supervise says
how). Only a group that outlives the grace period is killed, since a SIGKILL leaves
that shared memory behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


def stop_server(proc: subprocess.Popen[Any], grace_s: float = 60.0) -> None:
    """Interrupt ``proc``, wait ``grace_s``, then kill its process group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
