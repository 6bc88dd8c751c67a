"""scripts/gpu-check.sh on a machine without an NVIDIA GPU: one line, exit code 3,
nothing installed (the checks themselves need a GPU; see docs/live-bench.md)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu-check.sh"


def _has_gpu() -> bool:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    listed = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False)
    return any(line.startswith("GPU ") for line in listed.stdout.splitlines())


@pytest.mark.skipif(_has_gpu(), reason="this machine has a GPU: the script would run for real")
def test_gpu_check_without_a_gpu_says_so_in_one_line_and_exits_3(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    done = subprocess.run(
        ["bash", str(SCRIPT), str(tmp_path / "work")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "NIGHTJAR_GPU_VENV": str(venv)},
        timeout=60,
        check=False,
    )
    assert done.returncode == 3
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("gpu-check: FAIL no NVIDIA GPU")
    assert not venv.exists() and not (tmp_path / "work").exists()
