"""Segments that serve several workloads side by side (``mix``), and the bundled
long-context traces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nightjar.cli import main
from nightjar.errors import NightjarInputError
from nightjar.trace.schema import parse_trace_json
from nightjar.trace.trace import load_trace

MIX = {"sharegpt": 3, "longctx": 1}


def doc(**seg: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"duration_s": 200, "rate_rps": 10}
    base.update(seg)
    return {"seed": 5, "segments": [base]}


def test_a_mix_draws_each_workload_by_its_share_with_its_own_lengths(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc(mix=MIX)))
    t = load_trace(str(path))
    long_ = t.workload == "longctx"
    share = long_.mean()
    assert 0.2 < share < 0.3  # 1 in 4 of ~2000 arrivals
    assert t.prompt_tokens[long_].min() >= 1024  # longctx lengths
    assert np.median(t.prompt_tokens[~long_]) < 500  # chat lengths
    again = load_trace(str(path))
    assert np.array_equal(t.prompt_tokens, again.prompt_tokens)
    assert np.array_equal(t.workload, again.workload)


@pytest.mark.parametrize(
    ("seg", "message"),
    [
        ({"mix": {}}, "non-empty object"),
        ({"mix": [1, 2]}, "non-empty object"),
        ({"mix": {"chat": 1}}, "unknown workload 'chat'"),
        ({"mix": {"sharegpt": 0}}, "must be > 0"),
        ({"mix": {"sharegpt": -1, "longctx": 2}}, "must be > 0"),
        ({"mix": {"sharegpt": "a"}}, "finite number"),
        ({"mix": MIX, "workload": "sharegpt"}, "give 'mix' or 'workload'"),
        ({"mix": MIX, "prompt_tokens": 10}, "give 'mix' or 'prompt_tokens'"),
    ],
)
def test_bad_mixes_are_one_line_errors(seg: dict[str, Any], message: str) -> None:
    with pytest.raises(NightjarInputError, match=message):
        parse_trace_json(doc(**seg), "t.json", "t")


def test_the_cli_refuses_a_bad_mix_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc(mix={"longctx": 1, "nope": 1})))
    code = main(["sim", "--trace", str(path), "--policy", "nospec", "--no-oracle", "--quiet",
                 "--no-report", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "unknown workload 'nope'" in err


@pytest.mark.parametrize("name", ["longctx-mix", "longctx-rag"])
def test_bundled_long_context_traces_reach_tens_of_thousands_of_tokens(name: str) -> None:
    t = load_trace(name)
    assert t.prompt_tokens.max() > 20_000
    assert (t.prompt_tokens + t.output_tokens).max() <= 33_024  # a 32k context + answer
    assert "longctx" in set(t.workload)
