"""`nightjar export`: a run folder as vLLM's `bench serve --save-result` JSON, its
figures computed from the run's records as vLLM defines them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from nightjar.cli import main

SIM = ["sim", "--trace", "live-spec-wins", "--profile", "h100-80gb/llama-3.1-8b+llama-3.2-1b",
       "--policy", "nospec", "--policy", "nightjar+", "--no-oracle"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("run") / "r"
    assert main([*SIM, "--out", str(out)]) == 0
    return out


def test_each_run_becomes_vllms_result_with_its_own_figures(run_dir: Path, tmp_path: Path
                                                              ) -> None:
    out = tmp_path / "vllm"
    assert main(["export", str(run_dir), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.json")) == ["nightjar+.json", "nospec.json"]
    for policy in ("nospec", "nightjar+"):
        text = (out / f"{policy}.json").read_text()
        got = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in strict JSON"))
        req = pd.read_csv(run_dir / policy / "requests.csv")
        steps = pd.read_csv(run_dir / policy / "steps.csv")
        duration = req["finish_s"].max() - req["arrival_s"].min()
        assert got["completed"] == len(req) and got["failed"] == 0
        assert got["duration"] == pytest.approx(duration)
        assert got["output_throughput"] == pytest.approx(req["output_tokens"].sum() / duration)
        assert got["mean_ttft_ms"] == pytest.approx(1e3 * req["ttft_s"].mean())
        assert got["median_e2el_ms"] == pytest.approx(1e3 * req["e2e_s"].median())
        assert got["mean_tpot_ms"] == pytest.approx(1e3 * req["tpot_s"].mean())
        assert got["p99_ttft_ms"] == pytest.approx(1e3 * np.percentile(req["ttft_s"], 99))
        # ITL: each decode step is one chunk for each request it ran.
        dec = steps[steps["batch_size"] > 0]
        itl = (dec["step_time_s"] * dec["batch_size"]).sum() / dec["batch_size"].sum()
        assert got["mean_itl_ms"] == pytest.approx(1e3 * itl)
        assert got["nightjar"]["policy"] == policy and got["backend"] == "nightjar-sim"
    # Speculation emits several tokens a chunk: the gap between chunks outgrows TPOT.
    spec = json.loads((out / "nightjar+.json").read_text())
    assert spec["mean_itl_ms"] > spec["mean_tpot_ms"]


def test_seeds_get_a_file_each_and_nothing_is_overwritten(tmp_path: Path) -> None:
    runs = tmp_path / "seeds"
    one = [*SIM[:-5], "--policy", "nospec", "--no-oracle"]
    assert main([*one, "--seeds", "2", "--out", str(runs)]) == 0
    out = tmp_path / "vllm"
    assert main(["export", str(runs), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.glob("*.json")) == [f"nospec-seed-{s}.json" for s in (0, 1)]
    assert main(["export", str(runs), "--out", str(out)]) == 2  # not without --force
    assert main(["export", str(runs), "--out", str(out), "--force"]) == 0
