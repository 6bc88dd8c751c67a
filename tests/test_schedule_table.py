"""``nightjar schedule``: a batch-size -> K table for stock vLLM, searched in the simulator.

The printed JSON is vLLM 0.32's ``num_speculative_tokens_per_batch_size`` (inclusive
``[start, end, K]`` ranges from batch size 1, non-overlapping, K within the engine's
length), the search never ends worse than where it started on its own seed, and the
report compares the table with nightjar+ and every fixed K on held-out seeds.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

import nightjar
from nightjar.cli import main
from nightjar.profile.profile import load_profile
from nightjar.sim import SimConfig
from nightjar.sweep.table import (
    TableSearch,
    analytic_rows,
    policy_spec,
    run_metric,
    search_table,
    vllm_table,
)
from nightjar.trace.trace import load_trace

PROFILE = "a100-80gb/vicuna-13b+vicuna-68m"


def _trace(tmp_path: Path, n: int = 80) -> Path:
    rng = random.Random(5)
    t, reqs = 0.0, []
    for i in range(n):
        t += rng.expovariate(10.0 if i < n // 2 else 2.0)
        reqs.append({"arrival_s": round(t, 3), "prompt_tokens": rng.randrange(30, 200),
                     "output_tokens": rng.randrange(20, 120)})
    path = tmp_path / "load.json"
    path.write_text(json.dumps({"format_version": 1, "name": "load", "requests": reqs}))
    return path


def _check_vllm_format(table: list[list[int]], k_max: int) -> None:
    """vLLM's own rules (validate_and_normalize_dynamic_sd_schedule)."""
    assert table and table[0][0] == 1
    end = 0
    for lo, hi, k in table:
        assert lo == end + 1 and lo <= hi and 0 <= k <= k_max
        end = hi


def test_the_command_prints_a_table_vllm_takes(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "table.json"
    argv = ["schedule", "--profile", PROFILE, "--trace", str(_trace(tmp_path)), "--buckets",
            "1,4,16,64", "--passes", "1", "--seeds", "2", "--quiet", "--out", str(out),
            "--speculative-config", '{"method": "draft_model", "model": "d"}']
    assert main(argv) == 0
    captured = capsys.readouterr()
    printed = json.loads(captured.out.strip().splitlines()[-1])
    assert printed == json.loads(out.read_text())
    assert printed["method"] == "draft_model" and printed["model"] == "d"
    assert printed["num_speculative_tokens"] == 4
    _check_vllm_format(printed["num_speculative_tokens_per_batch_size"], 4)
    for name in ("tuned table", "nightjar+", "fixed:0", "fixed:4", "(best fixed)"):
        assert name in captured.err


def test_the_search_never_ends_worse_than_its_start(tmp_path: Path) -> None:
    search = TableSearch(load_profile(PROFILE), load_trace(str(_trace(tmp_path))),
                         SimConfig(gamma_max=4), "e2e", (1, 4, 16, 64), passes=1)
    start = run_metric(search, policy_spec(analytic_rows(search)), seed=0)
    found = search_table(search, seed=0)
    assert found.value <= start
    assert found.value == run_metric(search, policy_spec(found.rows), seed=0)
    again = search_table(search, seed=0)
    assert again.rows == found.rows  # deterministic for its seed
    _check_vllm_format(vllm_table(found.rows), 4)


def test_equal_neighbours_merge() -> None:
    rows = [(1, 3, 4), (4, 15, 4), (16, 63, 1), (64, 256, 1)]
    assert vllm_table(rows) == [[1, 15, 4], [16, 256, 1]]


def test_out_never_replaces_a_file_unasked(tmp_path: Path, capsys: Any) -> None:
    """Refused before the search: the trace itself, an existing file without --force,
    a folder; the user's files are untouched."""
    trace = tmp_path / "t.json"
    trace.write_bytes((Path(nightjar.__file__).parent / "trace/bundled/burst.json").read_bytes())
    kept = trace.read_bytes()
    other = tmp_path / "table.json"
    other.write_text("mine\n")
    for out, needle in ((trace, "it is the input"), (other, "pass --force"),
                        (tmp_path, "not a regular file")):
        argv = ["schedule", "--profile", PROFILE, "--trace", str(trace), "--out", str(out)]
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and needle in err, err
    assert trace.read_bytes() == kept and other.read_text() == "mine\n"


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--buckets", "2,4"], "starting at 1"),
        (["--buckets", "1,x"], "comma-separated integers"),
        (["--metric", "speed"], "invalid choice"),
        (["--gamma-max", "9"], "exceeds the profile's table"),
        (["--speculative-config", "[1]"], "must be a JSON object"),
        (["--seeds", "0"], "--seeds must be in 1..1000"),
        (["--seeds", "1000000000"], "--seeds must be in 1..1000"),
        (["--seed", str(2**63 - 2), "--seeds", "3"], "the held-out seeds pass"),
        (["--vllm", "0.31.0"], "supports vLLM 0.32.0, 0.33.0, 0.34.0 only"),
        # vLLM's V1 runner keeps a static K for a suffix drafter whatever the table says.
        (["--vllm", "0.33.0", "--speculative-config", '{"method": "suffix"}'],
         "ignores num_speculative_tokens_per_batch_size for the 'suffix' method"),
    ],
)
def test_bad_input(flags: list[str], needle: str, capsys: Any) -> None:
    argv = ["schedule", "--profile", PROFILE, "--trace", "burst", *flags]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own errors
        code = int(exc.code or 0)
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and needle in err, err
