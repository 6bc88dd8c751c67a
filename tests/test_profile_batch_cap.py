"""The measured profiler's default batches: up to the engine's batch cap, cut to
what its KV pool holds (issue 41: a grid that stopped at 64 left every larger batch
to a straight line from two measured points)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.cli import main
from nightjar.core.defaults import DEFAULT_MAX_NUM_SEQS
from nightjar.errors import NightjarInputError
from nightjar.live.profiling.grid import ProfilePlan, doubling
from nightjar.live.profiling.inputs import batch_sizes
from nightjar.live.profiling.ladder import requests

# A measured profile of the CPU engine and the tiny pair (the 2026-12-03 agreement round).
REPORT_PROFILE = (Path(__file__).parents[1] / "reports" / "simulator" / "agreement-20261203d"
                  / "profile.json")


def test_the_default_sizes_double_up_to_the_cap_and_end_on_it() -> None:
    assert doubling(1) == (1,)
    assert doubling(64) == (1, 2, 4, 8, 16, 32, 64)
    assert doubling(100) == (1, 2, 4, 8, 16, 32, 64, 100)
    plan = ProfilePlan("t", "d", "t", "d")
    assert max(plan.batch_sizes) == plan.max_num_seqs == DEFAULT_MAX_NUM_SEQS
    assert batch_sizes(None, 48) == doubling(48)
    assert batch_sizes("8,1", 48) == (1, 8)  # given sizes stand as given
    for bad in (0, 10**9):
        with pytest.raises(NightjarInputError, match="--max-num-seqs"):
            batch_sizes(None, bad)


def test_the_pool_bound_is_every_request_at_its_last_token_in_whole_blocks() -> None:
    plan = ProfilePlan("t", "d", "t", "d", batch_sizes=(4,), contexts=(100,), gammas=(0, 1))
    reqs = requests((4,), 100, plan.output_tokens)  # 4 x (84 prompt + 32 output)
    assert reqs == [(84, 32)] * 4
    assert plan.pool_blocks(100, 16) == 4 * 8  # 84 + 32 + 2 drafts' slots: 8 blocks of 16
    assert plan.pool_blocks(100, 128) == 4  # one block of 128 each


def test_a_pool_too_small_cuts_the_batches_to_the_largest_that_fits() -> None:
    plan = ProfilePlan("t", "d", "t", "d")
    need = max(plan.pool_blocks(c, 16) for c in plan.contexts)
    assert plan.within_pool(need, 16) is plan
    cut = plan.within_pool(need // 2, 16)
    top = max(cut.batch_sizes)
    assert top < 256 and cut.batch_sizes == (*(b for b in plan.batch_sizes if b < top), top)
    assert all(cut.pool_blocks(c, 16) <= need // 2 for c in cut.contexts)
    # The largest that fits: one more request would not.
    bigger = ProfilePlan("t", "d", "t", "d", batch_sizes=(*cut.batch_sizes[:-1], top + 1))
    assert any(bigger.pool_blocks(c, 16) > need // 2 for c in bigger.contexts)
    cut.check()
    # Sizes the user gave are measured as given (the engine preempts, and says so).
    given = ProfilePlan("t", "d", "t", "d", pool_cap=False)
    assert given.within_pool(1, 16) is given


def test_the_cut_rounds_each_request_to_the_engines_own_block() -> None:
    # The CPU engine's pool on 2026-12-07: 454 blocks of 128 tokens (58112 tokens).
    # Counted in blocks of 16 a window of 99 at context 512 fit, and the engine
    # preempted 7 requests after 12 minutes of profiling; in its own blocks, 90 fit.
    plan = ProfilePlan("t", "d", "t", "d")
    naive = plan.within_pool(58112 // 16, 16)
    assert max(naive.batch_sizes) == 99
    assert any(naive.pool_blocks(c, 128) > 454 for c in naive.contexts)
    cut = plan.within_pool(454, 128)
    assert max(cut.batch_sizes) == 90
    assert all(cut.pool_blocks(c, 128) <= 454 for c in cut.contexts)


def test_show_says_when_the_pool_stopped_the_batches_short_of_the_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = json.loads(REPORT_PROFILE.read_text())
    data["measured"]["batch_cap"] = {"max_num_seqs": 256, "pool_tokens": 65056,
                                     "largest_batch": 64}
    capped = tmp_path / "capped.json"
    capped.write_text(json.dumps(data))
    assert main(["profile", "--show", str(capped)]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "measured up to 64, what the KV pool (65056 tokens) held" in said
    assert "cap 256" in said
    data["measured"]["batch_cap"]["largest_batch"] = 256  # reached: nothing to say
    capped.write_text(json.dumps(data))
    assert main(["profile", "--show", str(capped)]) == 0
    assert "KV pool (" not in capsys.readouterr().out
