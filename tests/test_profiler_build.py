"""The measured profiler's pure parts: the gamma cycle, which steps count for which cell,
the re-measure set and the refusal of an inconsistent profile (no vLLM needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.commands.profile_measured import _refuse_inconsistent
from nightjar.core.records import StepRecord
from nightjar.errors import NightjarInputError
from nightjar.live.profiling.build import EngineRun, Window, decode_cells
from nightjar.live.profiling.grid import ProfilePlan
from nightjar.live.profiling.profiler import _cells_of
from nightjar.live.profiling.session import decode_cycle, window_count
from nightjar.profile.check import inversions


def test_the_cycle_holds_every_gamma_and_rotates_its_start() -> None:
    import nightjar.live.cycle  # noqa: F401  (registers decode-cycle, as the scheduler does)
    from nightjar.core.policy import PolicyEnv
    from nightjar.core.types import StepContext, StepOutcome
    from nightjar.policies.registry import make_policy

    assert decode_cycle((0, 1, 2, 3), 3, 0) == "decode-cycle:1,2,3,0/3"
    assert decode_cycle((0, 1, 2, 3), 3, 1) == "decode-cycle:2,3,0,1/3"
    assert decode_cycle((0, 1, 2, 3), 3, 4) == decode_cycle((0, 1, 2, 3), 3, 0)
    # Steps that prefill prompts do not move the cycle: it starts at the first pure
    # decode step however many steps the window's prompts take.
    policy = make_policy(decode_cycle((0, 1, 2), 2, 0), PolicyEnv(gamma_max=2))
    ctx = StepContext(now=0.0, batch_size=4, num_waiting=0, kv_free_blocks=10,
                      kv_total_blocks=10, draft_resident=True, gamma_max=2)
    seen: list[int] = []
    for prefill in (512, 512, 64, 0, 0, 0, 0, 0, 0, 0):
        seen.append(policy.decide(ctx))
        policy.observe(StepOutcome(gamma=seen[-1], batch_size=4, step_time_s=0.1, drafted=0,
                                   accepted=0, emitted=4, prefill_tokens=prefill))
    assert seen == [1, 1, 1, 1, 1, 2, 2, 0, 0, 1]
    with pytest.raises(NightjarInputError, match="policy 'decode-cycle:1,x/2'"):
        make_policy("decode-cycle:1,x/2", PolicyEnv(gamma_max=2))


def _step(t: float, b: int, gamma: int, dur: float = 0.1) -> StepRecord:
    return StepRecord(t, dur, b, 0, gamma, 0, b * gamma, 0, b, 0, 100, "resident",
                      mean_context_len=32.0)


def test_only_steps_that_verified_and_proposed_the_same_gamma_count() -> None:
    # Verified K (the step's gamma) lags the proposed K (chosen) by one step.
    chosen = [1, 1, 1, 2, 2, 2, 0, 0, 0]
    verified = [0, *chosen[:-1]]
    steps = [_step(0.2 * i, 4, g, dur=0.1 + 0.01 * g) for i, g in enumerate(verified)]
    # A window of B = 4 at context 32; the last step's batch shrank (a request finished).
    steps.append(_step(0.2 * len(steps), 3, 0))
    chosen.append(0)
    run = EngineRun(True, steps, [], [Window("decode", 4, 32, 0.0, 10.0)], {}, 100,
                    chosen=chosen)
    cells = {g: decode_cells(run, g) for g in (0, 1, 2)}
    # gamma 1: steps 2, 3 (verified 1, proposed 1); step 1 verified 0 and proposed 1.
    assert cells[1][(4, 32)][3] == 2
    assert cells[2][(4, 32)][3] == 2
    # gamma 0: steps 7, 8 only (step 0 proposed 1; step 9 ran 3 requests, not 4).
    assert cells[0][(4, 32)][3] == 2
    assert cells[2][(4, 32)][0] == pytest.approx(120.0)  # ms: 0.1 + 0.02 s
    # Without the proposed K (an engine at one fixed gamma) every step of it counts.
    plain = EngineRun(False, [_step(0.2 * i, 4, 0) for i in range(5)], [],
                      [Window("decode", 4, 32, 0.0, 2.0)], {}, 100)
    assert decode_cells(plain, 0)[(4, 32)][3] == 5


def _profile_rows(step: dict[tuple[int, int], float]) -> dict[str, list[list[float]]]:
    return {"decode": [[b, g, 32.0, ms, 0.0, 0.0] for (b, g), ms in step.items()]}


def test_inconsistent_cells_name_the_points_to_measure_again(tmp_path: Path) -> None:
    # gamma 1 cheaper than gamma 0 at B = 4; B = 8 cheaper than B = 4 at gamma 1.
    data = _profile_rows({(4, 0): 40.0, (4, 1): 30.0, (8, 0): 45.0, (8, 1): 20.0})
    found = inversions(data)
    assert {(i.axis, i.batch_size) for i in found} == {("gamma", 4), ("batch", 4),
                                                        ("gamma", 8)}
    assert _cells_of(found) == [(4, 32.0), (8, 32.0)]
    out = tmp_path / "p.json"
    with pytest.raises(NightjarInputError, match="still contradict") as err:
        _refuse_inconsistent({**data, "measured": {}}, found, out, keep=False)
    assert "p.rejected.json" in str(err.value) and not out.exists()
    kept = json.loads((tmp_path / "p.rejected.json").read_text())
    assert kept["measured"]["inconsistent_cells"] == [i.describe() for i in found]
    # --keep-inconsistent: written, with the cells listed.
    mine = {**data, "measured": {}}
    _refuse_inconsistent(mine, found, out, keep=True)
    assert len(mine["measured"]["inconsistent_cells"]) == 3


def test_window_count_and_plan_rules() -> None:
    plan = ProfilePlan("t", "d", "t", "d", batch_sizes=(1, 8), contexts=(32,),
                       prefill_lengths=(16, 256), mixed_batch_sizes=(1,), mixed_tokens=(64,),
                       repeats=2, wake_pauses=())
    # Per repeat: 2 engines x 2 batches x 1 context, 2 engines x 2 prefills, 1 mixed; + accept
    # (the wake windows: tests/test_profile_wake.py).
    assert window_count(plan) == 2 * (4 + 4 + 1) + 1
    with pytest.raises(NightjarInputError, match="hold"):
        ProfilePlan("t", "d", "t", "d", hold=1).check()
