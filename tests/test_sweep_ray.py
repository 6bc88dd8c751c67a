"""``nightjar sweep --ray auto`` against a local Ray cluster started here: same numbers
as local processes. scripts/test.sh installs ray (the ``cluster`` extra) and sets
NIGHTJAR_TEST_RAY=1, so there a missing ray fails instead of skipping."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]

if os.environ.get("NIGHTJAR_TEST_RAY") != "1":
    pytest.importorskip("ray")
else:
    import ray  # noqa: F401  (must be installed: fail loudly)

pytestmark = pytest.mark.slow
# A private loopback cluster: no usage stats, and no token authentication (Ray >= 2.5x
# turns it on when ~/.ray/auth_token exists, which another Ray run may have left).
RAY_ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A one-node Ray cluster with 2 CPUs, stopped (with all its processes) at the end."""
    port = _free_port()
    log = tmp_path_factory.mktemp("ray") / "head.log"
    ray_bin = Path(sys.executable).parent / "ray"
    env = RAY_ENV
    with log.open("w") as f:
        head = subprocess.Popen(
            [str(ray_bin), "start", "--head", "--port", str(port), "--num-cpus", "2",
             "--include-dashboard", "false", "--disable-usage-stats", "--block"],
            stdout=f, stderr=subprocess.STDOUT, env=env,
        )
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            assert head.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, "ray head did not start in 120 s"
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        head.terminate()  # `ray start --block` stops every process it started
        head.wait(timeout=60)


def _sweep(out: Path, trace: Path, extra: list[str], env: dict[str, str]) -> pd.DataFrame:
    proc = subprocess.run(
        [sys.executable, "-m", "nightjar.cli", "sweep", "--trace", str(trace),
         "--rate-scale", "1,2", "--seeds", "2", "--policy", "nospec", "--policy", "nightjar+",
         "--out", str(out), "--quiet", "--no-report", *extra],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    assert "8 cells: 8 computed, 0 reused" in proc.stderr
    return pd.read_csv(out / "results.csv")


def test_ray_gives_the_same_numbers_as_local_processes(tmp_path: Path, ray_address: str) -> None:
    trace = tmp_path / "small.json"
    trace.write_text(json.dumps({
        "format_version": 1, "name": "small", "seed": 3, "workload": "alpaca",
        "segments": [{"duration_s": 10, "rate_rps": 4}, {"duration_s": 10, "rate_rps": 12}],
    }))
    env = RAY_ENV
    local = _sweep(tmp_path / "local", trace, ["--jobs", "2"], env)
    remote = _sweep(tmp_path / "ray", trace, ["--ray", "auto"],
                    {**env, "RAY_ADDRESS": ray_address})
    # Identical, column for column, except the wall-clock time each cell took and the
    # command, which is the driver's (not a Ray worker's) on either backend.
    apart = ["wall_s", "command"]
    pd.testing.assert_frame_equal(local.drop(columns=apart), remote.drop(columns=apart))
    assert remote["command"].str.startswith("nightjar sweep ").all()
    assert remote["command"].str.endswith("--ray auto").all()
    assert local["requests_total"].nunique() > 1  # the seeds did change the arrivals


@pytest.mark.parametrize("how", ["address", "auto"])
def test_unreachable_ray_cluster_is_one_line(tmp_path: Path, how: str) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"format_version": 1, "seed": 0, "segments": [
        {"duration_s": 2, "rate_rps": 2}]}))
    dead = f"127.0.0.1:{_free_port()}"
    env = dict(RAY_ENV)
    if how == "auto":
        env["RAY_ADDRESS"] = dead  # as if the cluster had stopped since
    proc = subprocess.run(
        [sys.executable, "-m", "nightjar.cli", "sweep", "--trace", str(trace), "--policy",
         "nospec", "--ray", dead if how == "address" else "auto",
         "--out", str(tmp_path / "o"), "--quiet"],
        capture_output=True, text=True, cwd=REPO, timeout=300, env=env,
    )
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("nightjar: error: --ray ") and "cannot connect" in line
