"""The elastic draft-memory controller: transitions, filters, clamp, anti-thrash."""

from __future__ import annotations

import random

import pytest

from nightjar.core.memory import Action, DraftState, MemoryConfig, MemoryController
from nightjar.core.types import StepContext
from nightjar.errors import NightjarInputError

DRAFT = 800  # the draft's footprint in blocks (about 17% of a 4938-block pool)
TOTAL = 4938
DT = 0.05  # seconds per engine step in these synthetic runs


def ctx(now: float, free: int, waiting: int = 0, resident: bool = True) -> StepContext:
    return StepContext(
        now=now,
        batch_size=8,
        num_waiting=waiting,
        kv_free_blocks=free,
        kv_total_blocks=TOTAL,
        draft_resident=resident,
        gamma_max=4,
    )


def state(mc: MemoryController) -> DraftState:
    # A call, so that mypy does not narrow ``mc.state`` across the controller's methods.
    return mc.state


def quick(**kw: float | int | bool) -> MemoryConfig:
    """A config without time filters, so single transitions are easy to drive."""
    base: dict[str, float | int | bool] = {"reload_hold_s": 0.0, "min_dwell_s": 0.0}
    base.update(kw)
    return MemoryConfig(**base)  # type: ignore[arg-type]


def drive(mc: MemoryController, t: float, n: int, free: int, waiting: int, gamma: int) -> float:
    """Step ``n`` times with the same load; returns the next time. Must not transition."""
    for _ in range(n):
        assert mc.step(ctx(t, free, waiting), gamma) is Action.NONE
        t += DT
    return t


def test_full_cycle_and_accounting() -> None:
    mc = MemoryController(quick(), DRAFT)
    t = drive(mc, 0.0, 2, free=100, waiting=0, gamma=0)  # short, but only 2 steps
    assert mc.step(ctx(t, 100), 0) is Action.START_OFFLOAD
    assert mc.state is DraftState.OFFLOADING and not mc.draft_resident
    mc.offload_done(t + 0.5)
    assert state(mc) is DraftState.OFFLOADED
    t = drive(mc, t + 0.5, 2, free=DRAFT + 151, waiting=0, gamma=3)
    assert mc.step(ctx(t, DRAFT + 151), 3) is Action.START_RELOAD
    assert state(mc) is DraftState.RELOADING
    mc.reload_done(t + 0.25)
    assert state(mc) is DraftState.RESIDENT and mc.draft_resident
    assert [s for _, s in mc.history] == [
        DraftState.RESIDENT,
        DraftState.OFFLOADING,
        DraftState.OFFLOADED,
        DraftState.RELOADING,
        DraftState.RESIDENT,
    ]
    s = mc.summary(t + 1.25)
    assert (s["offloads"], s["reloads"], s["gain_reloads"]) == (1, 1, 0)
    assert s["time_offloading_s"] == pytest.approx(0.5)
    assert s["time_reloading_s"] == pytest.approx(0.25)
    assert s["time_offloaded_s"] == pytest.approx(2 * DT)
    assert s["time_resident_s"] == pytest.approx(2 * DT + 1.0)
    assert [str(x) for x in DraftState] == ["resident", "offloading", "offloaded", "reloading"]


def test_offload_needs_k_consecutive_short_steps_with_gamma_zero() -> None:
    mc = MemoryController(quick(), DRAFT)
    t = drive(mc, 0.0, 2, free=100, waiting=0, gamma=0)
    t = drive(mc, t, 1, free=3000, waiting=0, gamma=0)  # one roomy step breaks the streak
    t = drive(mc, t, 2, free=3000, waiting=2, gamma=0)  # waiting requests count as short
    t = drive(mc, t, 1, free=100, waiting=0, gamma=2)  # the policy wants to speculate
    t = drive(mc, t, 2, free=100, waiting=0, gamma=0)
    assert mc.step(ctx(t, 100), [0, 0, 0]) is Action.START_OFFLOAD  # per-request zeros


def test_per_request_decision_with_any_speculation_blocks_offload() -> None:
    mc = MemoryController(quick(k_offload=1), DRAFT)
    assert mc.step(ctx(0.0, 10, 5), [0, 2, 0]) is Action.NONE
    assert mc.step(ctx(DT, 10, 5), []) is Action.START_OFFLOAD


def test_reload_needs_room_above_footprint_plus_mark_and_no_waiting() -> None:
    mc = MemoryController(quick(k_offload=1), DRAFT)
    assert mc.step(ctx(0.0, 0, 1), 0) is Action.START_OFFLOAD
    mc.offload_done(0.1)
    edge = DRAFT + 150  # exactly footprint + mark: not enough, the band is strict
    t = drive(mc, 0.1, 10, free=edge, waiting=0, gamma=3)
    t = drive(mc, t, 10, free=TOTAL, waiting=1, gamma=3)
    t = drive(mc, t, 2, free=edge + 1, waiting=0, gamma=3)
    assert mc.step(ctx(t, edge + 1), 3) is Action.START_RELOAD


def test_no_transition_while_a_transfer_is_in_flight() -> None:
    mc = MemoryController(quick(k_offload=1, k_reload=1), DRAFT)
    assert mc.step(ctx(0.0, 0, 3), 0) is Action.START_OFFLOAD
    # Conditions that would reload at once if the draft were OFFLOADED.
    drive(mc, DT, 50, free=TOTAL, waiting=0, gamma=3)
    assert mc.state is DraftState.OFFLOADING
    with pytest.raises(RuntimeError):
        mc.reload_done(1.0)
    mc.offload_done(3.0)
    assert mc.step(ctx(3.0, TOTAL), 3) is Action.START_RELOAD
    drive(mc, 3.0 + DT, 50, free=0, waiting=9, gamma=0)  # pressure during the reload
    assert state(mc) is DraftState.RELOADING
    with pytest.raises(RuntimeError):
        mc.offload_done(4.0)
    mc.reload_done(4.0)
    assert mc.draft_resident


def test_gamma_is_clamped_while_not_resident() -> None:
    mc = MemoryController(quick(k_offload=1), DRAFT)
    assert mc.effective_gamma(3) == (3, False)
    assert mc.effective_gamma([1, 4]) == ([1, 4], False)
    mc.step(ctx(0.0, 0, 2), 0)
    for finish in (mc.offload_done, None):
        assert not mc.draft_resident
        assert mc.effective_gamma(3) == (0, True)
        assert mc.effective_gamma(0) == (0, False)  # a chosen 0 is not an override
        assert mc.effective_gamma([0, 2, 1]) == ([0, 0, 0], True)
        assert mc.effective_gamma([0, 0]) == ([0, 0], False)
        if finish is not None:
            finish(0.5)
    mc.step(ctx(1.0, TOTAL), 2)
    mc.step(ctx(1.1, TOTAL), 2)
    assert mc.step(ctx(1.2, TOTAL), 2) is Action.START_RELOAD
    assert mc.effective_gamma(2) == (0, True)  # still unusable while reloading
    mc.reload_done(1.5)
    assert mc.effective_gamma(2) == (2, False)


def test_disabled_controller_never_leaves_resident() -> None:
    mc = MemoryController(quick(enabled=False, k_offload=1), DRAFT)
    drive(mc, 0.0, 500, free=0, waiting=50, gamma=0)
    assert mc.state is DraftState.RESIDENT and mc.offloads == 0
    assert mc.summary(25.0)["time_resident_s"] == pytest.approx(25.0)


def test_min_dwell_after_a_reload_delays_the_next_offload() -> None:
    mc = MemoryController(quick(k_offload=1, k_reload=1, min_dwell_s=2.0), DRAFT)
    assert mc.step(ctx(0.0, 0, 1), 0) is Action.START_OFFLOAD  # first stay: no dwell
    mc.offload_done(0.1)
    drive(mc, 0.1, 39, free=TOTAL, waiting=0, gamma=3)  # 1.95 s < 2 s offloaded
    assert mc.step(ctx(2.1, TOTAL), 3) is Action.START_RELOAD
    mc.reload_done(2.2)
    drive(mc, 2.2, 39, free=0, waiting=4, gamma=0)
    assert mc.step(ctx(4.2, 0, 4), 0) is Action.START_OFFLOAD


def test_room_for_the_draft_must_last_reload_hold_s() -> None:
    mc = MemoryController(quick(k_offload=1, reload_hold_s=1.0), DRAFT)
    mc.step(ctx(0.0, 0, 1), 0)
    mc.offload_done(0.0)
    t = drive(mc, 0.0, 19, free=TOTAL, waiting=0, gamma=3)  # 0.95 s of room
    t = drive(mc, t, 1, free=DRAFT + 100, waiting=0, gamma=3)  # one short step resets it
    t = drive(mc, t, 20, free=TOTAL, waiting=0, gamma=3)
    assert mc.step(ctx(t, TOTAL), 3) is Action.START_RELOAD


def test_arrivals_waiting_one_step_do_not_block_a_reload_at_low_load() -> None:
    # Light load: an arrival waits for one step every fourth step, the pool is roomy.
    mc = MemoryController(quick(k_offload=1, k_reload=3, reload_hold_s=1.0), DRAFT)
    mc.step(ctx(0.0, 0, 1), 0)
    mc.offload_done(0.0)
    t, actions = 0.0, []
    for i in range(40):
        actions.append(mc.step(ctx(t, TOTAL, 1 if i % 4 == 0 else 0), 3))
        t += DT
    assert actions.index(Action.START_RELOAD) == 23  # first 3 quiet steps after 1 s
    # But requests that keep waiting (k_reload steps never quiet) block it.
    mc = MemoryController(quick(k_offload=1, k_reload=3, reload_hold_s=1.0), DRAFT)
    mc.step(ctx(0.0, 0, 1), 0)
    mc.offload_done(0.0)
    assert all(
        mc.step(ctx(i * DT, TOTAL, 1 if i % 3 == 0 else 0), 3) is Action.NONE for i in range(200)
    )


def test_regretted_reloads_back_off_exponentially() -> None:
    cfg = MemoryConfig(min_dwell_s=1.0, regret_window_s=5.0, max_dwell_s=4.0)
    mc = MemoryController(cfg, DRAFT)
    dwells = []
    t = 0.0
    # Adversarial load: pressure and slack alternate as fast as the filters allow.
    for _ in range(5):
        while mc.step(ctx(t, 0, 3), 0) is not Action.START_OFFLOAD:
            t += DT
        mc.offload_done(t)
        dwells.append(mc.offloaded_dwell_s)
        start = t
        while mc.step(ctx(t, TOTAL), 0) is not Action.START_RELOAD:
            t += DT
        assert t - start >= mc.offloaded_dwell_s - 1e-9
        mc.reload_done(t)
    assert dwells == [1.0, 2.0, 4.0, 4.0, 4.0]
    assert mc.regretted == 4
    # A reload that served longer than the window resets the backoff.
    t = drive(mc, t, int(6.0 / DT), free=TOTAL, waiting=0, gamma=3)
    while mc.step(ctx(t, 0, 3), 0) is not Action.START_OFFLOAD:
        t += DT
    assert mc.offloaded_dwell_s == 1.0 and mc.regretted == 4


def test_gain_hook_reloads_early_only_when_gain_exceeds_cost() -> None:
    def offloaded(reload_cost_s: float | None, **kw: float | int | bool) -> MemoryController:
        mc = MemoryController(quick(k_offload=1, **kw), DRAFT, reload_cost_s=reload_cost_s)
        mc.step(ctx(0.0, 0, 1), 0)
        mc.offload_done(0.0)
        return mc

    # Requests wait (no ordinary reload), free blocks cover the draft, gain 0.01 s/step.
    free = DRAFT + 10
    mc = offloaded(0.1)
    actions = [mc.step(ctx(i * DT, free, 2), 0, spec_gain_s=0.01) for i in range(1, 12)]
    assert actions.index(Action.START_RELOAD) == 10  # 11 x 0.01 > 0.1, 10 x 0.01 is not
    assert mc.gain_reloads == 1 and mc.reloads == 1

    # A gain streak that breaks (gain <= 0, unknown, or too few free blocks) starts over.
    mc = offloaded(0.1)
    gains = [0.05, 0.04, -0.01, 0.05, None, 0.05, 0.06]
    frees = [free, free, free, free, free, DRAFT - 1, free]
    for i, (g, f) in enumerate(zip(gains, frees, strict=True)):
        assert mc.step(ctx(i * DT, f, 2), 0, spec_gain_s=g) is Action.NONE
    assert mc.step(ctx(1.0, free, 2), 0, spec_gain_s=0.06) is Action.START_RELOAD

    # Gain below cost for ever, no cost known, or the hook disabled: no early reload.
    for mc, gain in ((offloaded(1.0), 0.0), (offloaded(None), 1.0)):
        drive_gain = [mc.step(ctx(i * DT, free, 2), 0, gain) for i in range(1, 200)]
        assert Action.START_RELOAD not in drive_gain
    mc = offloaded(0.1, reload_on_gain=False)
    assert all(mc.step(ctx(i * DT, free, 2), 0, 1.0) is Action.NONE for i in range(1, 50))


def _oscillate(cfg: MemoryConfig, phases: int, steps_per_phase: int, seed: int) -> tuple[int, int]:
    """A synthetic engine alternating high and low load; returns (offloads, reloads).

    High phases: requests wait and the policy picks gamma 0, with lulls of up to 12
    steps where nothing waits and blocks look free. Low phases: nothing waits and the
    policy speculates, with pressure spikes of up to ``k_offload - 1`` steps. Free
    blocks include the draft's footprint while it is away; transfers take 6 steps.
    """
    rng = random.Random(seed)
    mc = MemoryController(cfg, DRAFT)
    t, transfer_left, noise_left, noisy = 0.0, 0, 0, False
    for step in range(phases * steps_per_phase):
        high = (step // steps_per_phase) % 2 == 0
        # At least one normal step between two noise bursts, so bursts never merge.
        if noise_left == 0 and not noisy and rng.random() < 0.05:
            noise_left = rng.randint(1, 12 if high else cfg.k_offload - 1)
        noisy = noise_left > 0
        noise_left = max(0, noise_left - 1)
        pressured = high != noisy
        away = mc.state in (DraftState.OFFLOADED, DraftState.RELOADING)
        free = rng.randint(0, 120) if pressured else rng.randint(1200, 2500)
        free += DRAFT if away else 0
        action = mc.step(ctx(t, free, rng.randint(1, 20) if pressured else 0), 0 if high else 3)
        if action is not Action.NONE:
            transfer_left = 6
        elif transfer_left > 0:
            transfer_left -= 1
            if transfer_left == 0:
                (mc.offload_done if mc.state is DraftState.OFFLOADING else mc.reload_done)(t)
        t += DT
    return mc.offloads, mc.reloads


def test_oscillating_load_cycles_are_bounded_by_load_changes() -> None:
    phases = 20  # 19 load changes, 10 high phases, 10 s each
    offloads, reloads = _oscillate(MemoryConfig(), phases, 200, seed=7)
    assert offloads == phases // 2  # one offload per high phase: it does react
    assert reloads <= offloads <= phases - 1
    # The same trace with the paper's bare rule (no hold, no dwell) thrashes.
    bare = MemoryConfig(reload_hold_s=0.0, min_dwell_s=0.0)
    bare_offloads, _ = _oscillate(bare, phases, 200, seed=7)
    assert bare_offloads > 2 * phases


@pytest.mark.parametrize(
    "kw",
    [
        {"low_water_blocks": -1},
        {"k_offload": 0},
        {"k_reload": 0},
        {"min_dwell_s": -1.0},
        {"reload_hold_s": float("nan")},
        {"min_dwell_s": 5.0, "max_dwell_s": 1.0},
    ],
)
def test_bad_config_is_an_input_error(kw: dict[str, float]) -> None:
    with pytest.raises(NightjarInputError, match="memory: "):
        MemoryConfig(**kw)  # type: ignore[arg-type]


def test_bad_controller_arguments_are_input_errors() -> None:
    with pytest.raises(NightjarInputError, match="draft_blocks"):
        MemoryController(MemoryConfig(), -1)
    with pytest.raises(NightjarInputError, match="reload_cost_s"):
        MemoryController(MemoryConfig(), 10, reload_cost_s=-0.5)


def test_force_starts_a_transfer_only_from_the_state_it_leaves() -> None:
    from nightjar.core.memory import Action, DraftState, MemoryConfig, MemoryController

    ctrl = MemoryController(MemoryConfig(), draft_blocks=10)
    assert not ctrl.force(Action.START_RELOAD, 0.0)
    assert ctrl.force(Action.START_OFFLOAD, 0.0)
    assert ctrl.state is DraftState.OFFLOADING and ctrl.offloads == 1
    assert not ctrl.force(Action.START_OFFLOAD, 0.1)
    ctrl.offload_done(0.2)
    assert ctrl.force(Action.START_RELOAD, 0.3)
    ctrl.reload_done(0.4)
    assert ctrl.draft_resident and ctrl.reloads == 1
