"""Per-request opt-out of speculation: the trace field and the simulator."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from nightjar.errors import NightjarInputError
from nightjar.profile.profile import DEFAULT_PROFILE, load_profile
from nightjar.sim import SimConfig, simulate
from nightjar.trace.schema import parse_trace_json
from nightjar.trace.trace import load_trace, trace_to_json

OUT = {2, 5}


def explicit(tmp_path: Path) -> Path:
    reqs: list[dict[str, Any]] = [
        {"arrival_s": 0.1 * i, "prompt_tokens": 50, "output_tokens": 40}
        for i in range(8)
    ]
    for i in OUT:
        reqs[i]["speculate"] = False
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"requests": reqs}))
    return path


def test_opted_out_requests_are_never_speculated_in_the_simulator(tmp_path: Path) -> None:
    trace = load_trace(str(explicit(tmp_path)))
    assert trace.speculate is not None and set(np.flatnonzero(~trace.speculate)) == OUT
    r = simulate(trace, load_profile(DEFAULT_PROFILE), "fixed:3", SimConfig(seed=1))
    drafted = {rec.request_id: rec.drafted for rec in r.requests}
    assert all(drafted[i] == 0 for i in OUT)
    assert all(drafted[i] > 0 for i in range(8) if i not in OUT)
    assert all(np.isfinite(rec.finish_s) for rec in r.requests)


def test_the_field_survives_export_and_segments_take_it(tmp_path: Path) -> None:
    trace = load_trace(str(explicit(tmp_path)))
    back = tmp_path / "back.json"
    back.write_text(json.dumps(trace_to_json(trace)))
    again = load_trace(str(back))
    assert again.speculate is not None and np.array_equal(again.speculate, trace.speculate)
    seg = {"seed": 1, "segments": [{"duration_s": 5, "rate_rps": 4, "speculate": False},
                                   {"duration_s": 5, "rate_rps": 4}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(seg))
    t = load_trace(str(path))
    assert t.speculate is not None
    assert not t.speculate[t.arrival_s < 5].any() and t.speculate[t.arrival_s >= 5].all()
    assert load_trace("burst").speculate is None  # nobody opts out: no column


@pytest.mark.parametrize("value", [0, "no", None, 1.0])
def test_a_non_boolean_speculate_is_one_line_error(value: Any) -> None:
    doc = {"requests": [{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 5,
                         "speculate": value}]}
    with pytest.raises(NightjarInputError, match=r"speculate must be true or false"):
        parse_trace_json(doc, "t.json", "t")
