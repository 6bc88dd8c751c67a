"""Decode windows that share one prefill (ladders) and the profile's duration estimate:
the pure parts, no vLLM needed."""

from __future__ import annotations

import pytest

from nightjar.core.records import StepRecord
from nightjar.live.profiling.build import EngineRun, Window, decode_cells
from nightjar.live.profiling.estimate import Rates, grid_seconds
from nightjar.live.profiling.grid import ProfilePlan
from nightjar.live.profiling.ladder import chains, ladder_prompts, requests
from nightjar.live.profiling.session import SETTLE_S, WAKE_SAMPLES, window_count


@pytest.mark.parametrize(("rungs", "context", "tokens"), [
    ((64, 32, 16, 8, 4, 2, 1), 512, 32),
    ((32, 8, 1), 96, 16),
    ((56, 40, 9), 300, 24),
])
def test_every_rung_decodes_at_the_nominal_mean_context(
    rungs: tuple[int, ...], context: int, tokens: int
) -> None:
    shapes = requests(rungs, context, tokens)
    assert len(shapes) == rungs[0]
    for k, b in enumerate(rungs):
        # The requests still running in rung k: those whose output outlasts k rungs.
        alive = [p + k * tokens + tokens / 2 for p, out in shapes if out > k * tokens]
        assert len(alive) == b
        # Rounding each group's prompt to a token moves the mean by under one token.
        assert sum(alive) / b == pytest.approx(context, abs=0.5)


def test_a_halving_ladder_prefills_what_its_largest_window_did() -> None:
    shapes = requests((64, 32, 16, 8, 4, 2, 1), 512, 32)
    assert sum(p for p, _ in shapes) == 64 * (512 - 16)
    # Seven plain windows prefilled 127 prompts of 496 tokens.
    plain = sum(p for b in (64, 32, 16, 8, 4, 2, 1) for p, _ in requests((b,), 512, 32))
    assert plain == 127 * 496


def test_chains_fall_back_to_plain_windows_where_a_ladder_does_not_fit() -> None:
    sizes = (1, 2, 4, 8, 16, 32, 64)
    assert chains(sizes, 512, 32, 2048) == [sizes[::-1]]
    # At a short context the last group's prompt would be negative: one window each.
    assert chains(sizes, 32, 32, 2048) == [(b,) for b in sizes[::-1]]
    assert ladder_prompts((64, 32), 32, 32) is None
    # The longest request (prompt + its output) must fit the model's length.
    assert all(len(c) < 7 for c in chains(sizes, 512, 32, 540))
    assert chains(sizes, 128, 32, 2048) == [(64, 32, 16, 8), (4, 2, 1)]
    assert requests((8,), 128, 32) == [(112, 32)] * 8  # a plain window: c - tokens/2


def test_the_plan_ladders_by_default_and_separate_windows_on_request() -> None:
    sizes = (1, 2, 4, 8, 16, 32, 64)
    plan = ProfilePlan("t", "d", "t", "d", batch_sizes=sizes)
    assert plan.decode_chains(512) == [(64, 32, 16, 8, 4, 2, 1)]
    assert len(plan.decode_chains(32)) == 7
    apart = ProfilePlan("t", "d", "t", "d", batch_sizes=sizes, ladders=False)
    assert apart.decode_chains(512) == [(b,) for b in (64, 32, 16, 8, 4, 2, 1)]
    # Per repeat: 2 engines x (7 + 1) decode windows, 2 x 8 prefills, 16 mixed, 30 wake.
    per_repeat = 2 * 8 + 2 * 8 + 16 + 2 * WAKE_SAMPLES * 5
    assert window_count(plan) == 2 * per_repeat + 1
    assert window_count(apart) == window_count(plan) + 2 * 2 * 6


def _step(t: float, batch: int) -> StepRecord:
    return StepRecord(t, 0.1 + 0.01 * batch, batch, 0, 0, 0, 0, 0, batch, 0, 100, "none",
                      0.0, False, 500.0)


def test_a_ladder_window_measures_each_rung_and_no_batch_between() -> None:
    # A ladder 4, 2 at context 512: 3 steps of 4, one of 3 (a group finishing), 2 of 2.
    sizes = [4, 4, 4, 3, 2, 2]
    steps = [_step(0.5 * i, b) for i, b in enumerate(sizes)]
    window = Window("decode", 4, 512, 0.0, 10.0, rungs=(4, 2))
    cells = decode_cells(EngineRun(False, steps, [], [window], {}, 100), 0)
    assert {k: v[3] for k, v in cells.items()} == {(4, 512): 3, (2, 512): 2}
    assert cells[(2, 512)][0] == pytest.approx(120.0)  # ms


def test_the_estimate_prices_prompt_tokens_and_decode_steps_apart() -> None:
    base = dict(batch_sizes=(1, 8), contexts=(32,), prefill_lengths=(16, 256),
                mixed_batch_sizes=(), mixed_tokens=(), wake_pauses=(), repeats=1,
                output_tokens=16)
    plan = ProfilePlan("t", "d", "t", "d", **base)
    r = Rates(prompt_s=0.001, step_1_s=0.05, step_max_s=0.12, b_max=8)
    rates = {"no draft": r, "draft": r}
    # Per engine: a ladder (8, 1) at 32 (prompts 8 x 24 tokens, 16 steps at B = 8 and 1),
    # prefills of 272 tokens; two switches; then the acceptance window.
    assert plan.decode_chains(32) == [(8, 1)]
    prompt = sum(p for p, _ in requests((8, 1), 32, 16))
    engine = 0.001 * prompt + 16 * (0.12 + 0.05) + 0.001 * 272
    accept = 16 * 0.12 + 0.001 * 8 * 32
    assert grid_seconds(plan, rates) == pytest.approx(2 * engine + 2 * SETTLE_S + accept)
    # Ladders cost less than a window per batch size at a long context.
    long = dict(base, contexts=(512,), batch_sizes=(1, 2, 4, 8))
    laddered = grid_seconds(ProfilePlan("t", "d", "t", "d", **long), rates)
    apart = grid_seconds(ProfilePlan("t", "d", "t", "d", **long, ladders=False), rates)
    assert laddered < 0.7 * apart
