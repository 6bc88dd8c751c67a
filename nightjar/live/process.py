"""Stopping a server that runs in its own process group (``nightjar live --serve``).

vLLM's server forks an engine core and workers; a SIGINT to the whole group lets each
unlink its shared memory and release its port. Only a group that outlives the grace
period is killed, since a SIGKILL leaves that shared memory behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
from typing import Any


def stop_server(proc: subprocess.Popen[Any], grace_s: float = 60.0) -> None:
    """Interrupt ``proc``'s process group, wait ``grace_s``, then kill it."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
