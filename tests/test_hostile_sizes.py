"""Inputs whose size or type the code once trusted (issue 40): work follows what runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nightjar.errors import NightjarInputError
from nightjar.trace.trace import load_trace


def test_a_huge_seat_cap_allocates_for_the_batch_that_runs() -> None:
    """--max-num-seqs 10**9 once preallocated (8, 10**9) int64 (59.6 GiB) up front and
    failed; sized by what runs, it gives the run a cap of 256 gives (no batch nears it)."""
    from nightjar.profile.profile import DEFAULT_PROFILE, load_profile
    from nightjar.sim.knobs import SimConfig
    from nightjar.sim.runner import simulate

    trace, profile = load_trace("steady").head(40), load_profile(DEFAULT_PROFILE)
    huge = simulate(trace, profile, "fixed:2", SimConfig(max_num_seqs=10**9))
    capped = simulate(trace, profile, "fixed:2", SimConfig(max_num_seqs=256))
    assert max(s.batch_size for s in capped.steps) < 256
    assert [r.finish_s for r in huge.requests] == [r.finish_s for r in capped.requests]


def test_a_numpy_seed_is_a_seed_and_a_bool_is_not() -> None:
    assert len(load_trace("steady", seed=np.int64(3))) == len(load_trace("steady", seed=3))
    with pytest.raises(NightjarInputError, match="integer"):
        load_trace("steady", seed=True)


@pytest.mark.parametrize("n", [2.5, 0, -1, True, "3"])
def test_a_trace_head_takes_a_whole_count(n: object) -> None:
    with pytest.raises(NightjarInputError, match="whole count"):
        load_trace("steady").head(n)  # type: ignore[arg-type]


def test_head_takes_a_numpy_count() -> None:
    assert len(load_trace("steady").head(np.int64(2))) == 2


def test_a_jsonl_prompt_may_hold_a_line_separator(tmp_path: Path) -> None:
    """U+2028 is legal raw inside a JSON string: the record is one line, not two."""
    from nightjar.trace.tool_formats import import_vllm_jsonl

    path = tmp_path / "d.jsonl"
    rows = [{"prompt": "a\u2028b\u2029c\x85d", "output_tokens": 4}, {"prompt": "e"}]
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
                    encoding="utf-8")
    trace, report = import_vllm_jsonl(path, rate_rps=1.0)
    assert report.kept == 2 and len(trace) == 2 and trace.prompts is not None
    assert "\u2028" in str(trace.prompts[0])


def test_a_sweep_file_seed_is_one_seed_and_seeds_a_count(tmp_path: Path) -> None:
    from nightjar.sweep.spec import read_config

    one = tmp_path / "one.toml"
    one.write_text("seed = 5\n", encoding="utf-8")
    assert read_config(one)["seeds"] == [5]
    count = tmp_path / "count.toml"
    count.write_text("seeds = 5\n", encoding="utf-8")
    assert read_config(count)["seeds"] == 5


@pytest.mark.parametrize("text", ['policy = ["nospec"]\npolicies = ["fixed:2"]\n',
                                  'trace = "steady"\ntraces = ["burst"]\n',
                                  "seed = 1\nseeds = 3\n"])
def test_a_sweep_file_naming_an_axis_twice_is_refused(tmp_path: Path, text: str) -> None:
    from nightjar.sweep.spec import read_config

    path = tmp_path / "s.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(NightjarInputError, match="name the same axis"):
        read_config(path)


def test_a_rate_scale_that_overflows_the_arrivals_is_refused_before_dividing() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow warning would leak to the user
        with pytest.raises(NightjarInputError, match="stretches the trace"):
            load_trace("steady").rate_scaled(5e-324)
