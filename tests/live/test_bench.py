"""``nightjar bench live`` on the small tiny pair: interleaving, pairing and load sampling.

One module-scoped benchmark (2 rounds of nospec, fixed:2 and nospec's noise twin on two
traces sharing the rounds, 12 and 6 short requests; two engine starts; ~3 min on two
shared cores) feeds every test. The
assertions are about what the engines did (which policy served which run, in which
order, on how many engine starts) and about the arithmetic of the tables, never about
how fast anything was.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from nightjar.cli import main
from nightjar.results.bench import read_bench
from nightjar.results.read import read_run_folder

REQUESTS = [{"arrival_s": 0.15 * i, "prompt_tokens": 20 + 3 * i, "output_tokens": 16 + i}
            for i in range(12)]
OTHER = [{"arrival_s": 0.3 * i, "prompt_tokens": 40, "output_tokens": 8} for i in range(6)]


@pytest.fixture(scope="module")
def bench(tiny: Any, make_llm: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    # make_llm preloads Intel OpenMP and prepares vLLM's environment.
    root = tmp_path_factory.mktemp("bench")
    trace = root / "t.json"
    trace.write_text(json.dumps({"name": "benchtest", "requests": REQUESTS}))
    other = root / "o.json"
    other.write_text(json.dumps({"name": "other", "requests": OTHER}))
    out = root / "out"
    argv = ["bench", "live", "--model", str(tiny.target), "--draft", str(tiny.draft),
            "--trace", str(trace), "--trace", str(other),
            "--policy", "nospec", "--policy", "fixed:2",
            "--gamma-max", "2", "--repeats", "2", "--kv-cache-gb", "0.25",
            # A shared test machine is never quiet: measure the load, never refuse a run.
            "--max-foreign", "100", "--quiet", "--out", str(out)]
    assert main(argv) == 0
    return out / "bench-benchtest"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_rounds_are_rotated_and_each_run_served_its_policy(bench: Path) -> None:
    rows = _rows(bench / "runs.csv")
    order = {int(r["round"]): [] for r in rows}
    for r in sorted(rows, key=lambda r: (int(r["round"]), int(r["position"]))):
        order[int(r["round"])].append(r["label"])
    # The plan's round is nospec, fixed:2, nospec#2; round 2 is rotated by one.
    assert order == {1: ["nospec", "fixed:2", "nospec#2"], 2: ["fixed:2", "nospec#2", "nospec"]}
    meta = json.loads((bench / "bench.json").read_text())
    # One engine with the draft, one without, for all six runs (run switches).
    assert meta["engine_starts"] == 2
    record = read_bench(bench)
    assert len(record.runs) == 6
    for run in record.runs:
        steps = run.result.steps
        assert steps and len(run.result.requests) == len(REQUESTS)
        assert all(r.finish_s == r.finish_s for r in run.result.requests)  # all finished
        decode = [s for s in steps if s.batch_size and not s.prefill_tokens]
        if run.policy == "fixed:2":
            # Every decode step after the first verified the policy's two drafts.
            assert sum(s.gamma == 2 for s in decode) >= len(decode) - 1
            assert sum(s.drafted for s in steps) > 0
        else:
            assert all(s.gamma == 0 and s.drafted == 0 for s in steps)
        assert run.result.policy == run.label


def test_pairs_are_per_round_differences(bench: Path) -> None:
    rows = _rows(bench / "runs.csv")
    value = {(r["label"], int(r["round"])): float(r["e2e_s_mean"]) for r in rows}
    pairs = [p for p in _rows(bench / "pairs.csv") if p["metric"] == "e2e_s_mean"]
    # The twin pairs with its original only: nospec-fixed:2 and the noise floor.
    assert {(p["a"], p["b"]) for p in pairs} == {("nospec", "fixed:2"), ("nospec", "nospec#2")}
    for p in pairs:
        diffs = [value[(p["a"], r)] - value[(p["b"], r)] for r in (1, 2)]
        assert int(p["rounds"]) == 2
        assert math.isclose(float(p["diff"]), sum(diffs) / 2, rel_tol=1e-9)
        # Two rounds: the t interval is mean ± 12.706 * |d1 - d2| / 2.
        half = 12.7062 * abs(diffs[0] - diffs[1]) / 2
        assert math.isclose(float(p["hi"]) - float(p["diff"]), half, rel_tol=1e-4)
        assert p["separated"] == str(int(float(p["lo"]) > 0 or float(p["hi"]) < 0))
    noise = [p for p in pairs if p["noise_floor"] == "1"]
    assert [(p["a"], p["b"]) for p in noise] == [("nospec", "nospec#2")]


def test_load_is_sampled_for_every_run(bench: Path) -> None:
    meta = json.loads((bench / "bench.json").read_text())
    assert meta["cpu_binding"]["source"] in ("nightjar", "user")
    cores = meta["cores"]
    for run in meta["runs"]:
        load = run["load"]
        assert load["available"] is True
        # The meter ran for the whole run, and saw our engine work on its cores.
        assert 0.5 * run["wall_s"] <= load["seconds"] <= run["wall_s"] + 1.0
        assert load["own_pct"] > 0
        assert 0 <= load["foreign_pct"] <= 100 + 1e-6
        assert set(cores) <= {int(c) for c in load["per_core_busy_pct"]}
        assert run["attempts"] == 1 and run["loaded"] is False
    # Every run folder records the binding its engine ran with.
    record = read_bench(bench)
    extra = read_run_folder(bench / "round-1" / record.runs[0].slug)[0].extra
    assert extra["omp_threads"] >= 1 and "cpu_bind_mask" in extra


def test_two_traces_share_the_rounds_and_the_engines(bench: Path) -> None:
    other = read_bench(bench.parent / "bench-other")
    mine = read_bench(bench)
    assert other.meta["interleaved_with"] == ["benchtest"]
    assert mine.meta["interleaved_with"] == ["other"]
    assert other.meta["engine_starts"] == mine.meta["engine_starts"] == 2
    assert len(other.runs) == 6
    assert all(len(r.result.requests) == len(OTHER) for r in other.runs)
    # Round 1 runs benchtest's block first, round 2 other's: the order rotates.
    for rnd, first, second in ((1, mine, other), (2, other, mine)):
        ends = [r.started_s + r.wall_s for r in first.runs if r.round == rnd]
        starts = [r.started_s for r in second.runs if r.round == rnd]
        assert max(ends) <= min(starts)
    later = [r.started_s for r in mine.runs if r.round == 2]
    assert max(r.started_s for r in other.runs if r.round == 1) < min(later)
