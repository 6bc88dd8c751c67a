"""``nightjar live --serve``'s supervisor: a stop reaches the server once, in order, and
nothing of the server's process group outlives it. Plain Python children stand in for
vLLM's API server and its engine processes (the live suite stops the real one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# The "server": counts the SIGINTs it gets, starts an "engine core" in its own group
# (as vLLM's API server does), stops when told, unless told to ignore stops.
SERVER = """
import os, signal, subprocess, sys, time
log, mode = sys.argv[1], sys.argv[2]
engine = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
open(log + ".engine", "w").write(str(engine.pid))
def stop(signum, frame):
    open(log, "a").write("SIGINT\\n")
    if mode == "obey":
        sys.exit(0)
signal.signal(signal.SIGINT, stop)
open(log + ".ready", "w").write("1")
while True:
    time.sleep(0.05)
"""

# The "nightjar live --serve" process: the supervisor around the server.
WRAPPER = """
import sys
from nightjar.live.supervise import run_supervised
code = run_supervised([sys.executable, "-c", sys.argv[1], sys.argv[2], sys.argv[3]], {})
sys.exit(code)
"""


def _start(tmp_path: Path, mode: str) -> tuple[subprocess.Popen[bytes], Path]:
    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, SERVER, str(log), mode],
                            start_new_session=True, env=env)
    deadline = time.monotonic() + 60
    while not (log.parent / "server.log.ready").exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    return proc, log


def _alive(pid: int) -> bool:
    # A zombie (exited, not yet reaped by init) counts as gone.
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (ProcessLookupError, FileNotFoundError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_a_terminals_ctrl_c_reaches_the_server_once_and_nothing_outlives_it(
    tmp_path: Path,
) -> None:
    proc, log = _start(tmp_path, "obey")
    engine = int((tmp_path / "server.log.engine").read_text())
    os.killpg(proc.pid, signal.SIGINT)  # the whole foreground group, as Ctrl-C
    assert proc.wait(timeout=60) == 128 + signal.SIGINT
    assert log.read_text() == "SIGINT\n"  # forwarded once, not sent to the group
    deadline = time.monotonic() + 5
    while _alive(engine) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(engine)  # the server's leftover "engine" was reaped


def test_a_second_stop_kills_a_server_that_ignores_the_first(tmp_path: Path) -> None:
    proc, log = _start(tmp_path, "ignore")
    proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 30
    while not log.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None  # still waiting on the server
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 128 + signal.SIGTERM
    assert log.read_text() == "SIGINT\n"
