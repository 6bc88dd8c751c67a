"""Mixed steps (decodes and a prompt chunk in one forward), issue 15: the profile's
measured mixed table, the price function that uses it, its edge pricing, the
profiler's aggregation, and validate's replay of every step through the price."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nightjar.core.records import StepRecord
from nightjar.errors import NightjarInputError
from nightjar.fidelity.compare import step_replay
from nightjar.live.profiling.build import (
    EngineRun,
    Window,
    mixed_cells,
    mixed_counts,
    mixed_rows,
    mixed_rows_rebased,
)
from nightjar.profile.profile import DEFAULT_PROFILE, Profile, load_profile
from nightjar.report.folder import write_all
from nightjar.results.read import load_run
from nightjar.results.run_set import ResultSet
from nightjar.sim import DraftKVMode, SimConfig, simulate
from nightjar.sim.price import StepShape, added_s, price_step
from nightjar.trace.trace import load_trace

# [batch_size, prompt tokens, added ms]
MIXED = [[1, 256, 100.0], [1, 1024, 400.0], [32, 256, 200.0], [32, 1024, 800.0]]


def _with_mixed(rows: list[list[Any]]) -> dict[str, Any]:
    data = load_profile(DEFAULT_PROFILE).to_json()
    data["mixed"] = rows
    return data


def _scaled(data: dict[str, Any], factor: float) -> dict[str, Any]:
    """Every time in a profile's tables times ``factor`` (a uniformly faster machine)."""
    out = dict(data)
    out["decode"] = [[b, g, c, *(t * factor for t in ts)] for b, g, c, *ts in data["decode"]]
    out["draft_forward"] = [[b, c, t * factor] for b, c, t in data["draft_forward"]]
    out["prefill"] = [[n, t * factor, d * factor] for n, t, d in data["prefill"]]
    out["mixed"] = [[b, n, t * factor] for b, n, t in data["mixed"]]
    return out


@pytest.fixture
def profile() -> Profile:
    return Profile.from_json(_with_mixed(MIXED), "mixed")


def test_mixed_lookup_exact_linear_and_chunked(profile: Profile) -> None:
    assert profile.has_mixed and not load_profile(DEFAULT_PROFILE).has_mixed
    assert profile.mixed_added_s(1, 256) == pytest.approx(0.1)
    assert profile.mixed_added_s(32, 1024) == pytest.approx(0.8)
    assert profile.mixed_added_s(1, 128) == pytest.approx(0.05)  # linear from (0, 0)
    assert profile.mixed_added_s(1, 640) == pytest.approx(0.25)
    mid = 1 + (32 - 1) / 2
    assert profile.mixed_added_s(int(mid), 256) == pytest.approx(0.15, rel=0.02)
    # Beyond the last column: full chunks of it plus the rest, not extrapolated.
    assert profile.mixed_added_s(1, 1024 + 256) == pytest.approx(0.5)
    assert profile.mixed_added_s(1, 0) == 0.0


def test_mixed_outside_the_batch_grid_is_priced_at_the_edge(profile: Profile) -> None:
    assert profile.mixed_off_grid(64) and not profile.mixed_off_grid(32)
    assert profile.mixed_added_s(64, 1024) == profile.mixed_added_s(32, 1024)


def test_a_partial_mixed_grid_is_refused() -> None:
    with pytest.raises(NightjarInputError, match="mixed"):
        Profile.from_json(_with_mixed(MIXED[:3]), "partial")
    with pytest.raises(NightjarInputError, match="mixed"):
        Profile.from_json(_with_mixed([[1, 256]]), "short row")


def test_a_mixed_step_is_priced_from_the_measured_table(profile: Profile) -> None:
    shape = StepShape(n_decode=8, g_max=0, drafted=0, mean_ctx=300.0, prefill_tokens=512,
                      draft_loaded=False, sync=True)
    price = price_step(profile, shape)
    decode = profile.step_time_s(8, 0, 300.0)
    assert price.decode_s == pytest.approx(decode)
    assert price.prefill_s == pytest.approx(profile.mixed_added_s(8, 512))
    assert price.total_s == pytest.approx(decode + profile.mixed_added_s(8, 512))
    assert not price.off_grid
    # Without the table the chunk costs what it adds on the prefill curve.
    plain = load_profile(DEFAULT_PROFILE)
    curve = added_s(plain.prefill_time_s, 8, 512, plain.max_prefill_tokens)
    assert price_step(plain, shape).prefill_s == pytest.approx(curve)
    assert curve != pytest.approx(price.prefill_s)
    # A step with no decode is a prefill step: the prefill curve, as before.
    alone = StepShape(n_decode=0, g_max=0, drafted=0, mean_ctx=0.0, prefill_tokens=512,
                      draft_loaded=False, sync=True)
    assert price_step(profile, alone).prefill_s == pytest.approx(profile.prefill_time_s(512))


def test_decode_tokens_beyond_the_mixed_grid_are_counted(profile: Profile) -> None:
    # 16 requests at gamma 3 run 64 decode tokens: above the table's 32, at its edge.
    shape = StepShape(n_decode=16, g_max=3, drafted=48, mean_ctx=300.0, prefill_tokens=256,
                      draft_loaded=True, sync=True)
    price = price_step(profile, shape)
    assert price.off_grid
    draft = added_s(profile.draft_prefill_time_s, 64, 256, profile.max_prefill_tokens)
    assert price.prefill_s == pytest.approx(profile.mixed_added_s(32, 256) + draft)


def test_the_simulator_counts_mixed_lookups_at_the_edge(profile: Profile) -> None:
    cfg = SimConfig(max_num_seqs=64, max_num_batched_tokens=2048)
    result = simulate(load_trace("steady_low"), profile, "fixed:3", cfg)
    steps = result.steps_frame()
    mixed = steps[(steps["batch_size"] > 0) & (steps["prefill_tokens"] > 0)]
    assert len(mixed) > 0
    assert result.extra["context_clamped_steps"] >= int(
        ((mixed["batch_size"] + mixed["drafted"]) > 32).sum()
    )


def _step(t: float, dur: float, b: int, prefill: int) -> StepRecord:
    return StepRecord(t, dur, b, 0, 0, prefill, 0, 0, b, 0, 100, "absent",
                      mean_context_len=40.0)


def test_profiler_mixed_cells_subtract_the_windows_own_decode_steps() -> None:
    steps = [_step(0.0, 0.1, 8, 0), _step(0.2, 0.12, 8, 0), _step(0.4, 0.5, 8, 256),
             _step(1.0, 0.1, 8, 0),
             # a window whose prompts the engine split over two steps: no clean cell
             _step(2.0, 0.1, 8, 0), _step(2.2, 0.3, 8, 128), _step(2.6, 0.3, 8, 128)]
    windows = [Window("mixed", 8, 256, 0.0, 1.5), Window("mixed", 8, 1024, 1.9, 3.0)]
    run = EngineRun(None, steps, [], windows, {}, 100)
    cells = mixed_cells(run)
    assert set(cells) == {(8, 256)}
    cell = cells[(8, 256)]
    assert (cell.added_ms, cell.decode_ms, cell.context, cell.steps) == (
        pytest.approx(400.0), pytest.approx(100.0), 40.0, 1)
    assert mixed_rows(run, (8,), (256,)) == [[8, 256, pytest.approx(400.0)]]
    # The profile records what each cell is the median of; the split window ran none.
    assert mixed_counts(run, (8,), (256, 1024)) == [[8, 256, 1], [8, 1024, 0]]
    # Added to a profile measured at another load: in that profile's time base, by the
    # ratio to the decode step of the same window (here the profile's is 1.5x faster).
    seen: list[tuple[int, float]] = []

    def decode_ms(b: int, ctx: float) -> float:
        seen.append((b, ctx))
        return 66.6667

    assert mixed_rows_rebased(run, (8,), (256,), decode_ms) == [
        [8, 256, pytest.approx(266.667, rel=1e-4)]]
    assert seen == [(8, 40.0)]
    with pytest.raises(NightjarInputError, match="mixed B=8 prompt tokens=1024"):
        mixed_rows(run, (8,), (256, 1024))
    assert mixed_rows(run, (), ()) == []


@pytest.mark.parametrize("policy", ["nospec", "fixed:3"])
def test_replaying_a_runs_steps_through_the_price_gives_its_step_times(
    profile: Profile, policy: str, tmp_path: Path
) -> None:
    # The simulator's own run, replayed step by step: every kind of step priced
    # exactly as it was charged (the check validate runs on live steps).
    # The replay prices gamma 0 with the sync draft pass: simulate in that mode.
    cfg = SimConfig(max_num_seqs=64, max_num_batched_tokens=2048, draft_kv_mode=DraftKVMode.SYNC)
    result = simulate(load_trace("steady_low"), profile, policy, cfg)
    write_all(ResultSet.build([result]), tmp_path)
    table = step_replay(load_run(next(tmp_path.iterdir())), profile, sync=True)
    assert set(table["kind"]) >= {"decode", "mixed"}
    assert table["total_error_pct"].abs().max() < 1e-6
    # A profile twice as slow on the mixed table shows it on the mixed steps only.
    slow = Profile.from_json(_with_mixed([[b, n, ms * 2] for b, n, ms in MIXED]), "slow")
    by_kind = step_replay(load_run(next(tmp_path.iterdir())), slow, sync=True).set_index("kind")
    assert by_kind.loc["mixed", "total_error_pct"] > 1.0
    assert abs(by_kind.loc["decode", "total_error_pct"]) < 1e-6
    assert by_kind.loc["mixed", "median_error_run_base_pct"] > 1.0
    # A machine uniformly 1.5x slower than the profile: every step is off by the same
    # factor, which the run's own time base takes out.
    faster = Profile.from_json(_scaled(profile.to_json(), 1 / 1.5), "fast")
    by_kind = step_replay(load_run(next(tmp_path.iterdir())), faster, sync=True).set_index("kind")
    assert (by_kind["total_error_pct"] < -30.0).all()
    assert by_kind["median_error_run_base_pct"].abs().max() < 1e-6


def test_live_policy_lookups_off_the_grid_are_priced_as_the_profile_prices_and_counted(
) -> None:
    from nightjar.live.profiling.latency import Clamped

    base = load_profile(DEFAULT_PROFILE)
    lat = Clamped(base)
    assert lat.step_time_s(4, 2, 512.0) == base.step_time_s(4, 2, 512.0)
    assert lat.off_grid_lookups == 0
    big = base.max_batch_size * 2
    # The context at its edge; the batch past the table, along its last segment.
    assert lat.step_time_s(big, 2, 1e9) == base.step_time_s(big, 2, base.max_context_len)
    assert lat.step_time_s(big, 2, 1e9) > base.step_time_s(
        base.max_batch_size, 2, base.max_context_len)
    assert lat.draft_forward_s(4, float("nan")) == base.draft_forward_s(4, base.min_context_len)
    assert lat.off_grid_lookups == 3


def test_a_prompt_only_step_pays_the_drafts_it_proposes_for_its_prompts() -> None:
    # vLLM's drafter runs at the end of the step that emits a prompt's first token:
    # one pass over the prompt (the draft's prefill), then K - 1 more at that batch.
    plain = load_profile(DEFAULT_PROFILE)
    base = {"n_decode": 0, "g_max": 0, "drafted": 0, "mean_ctx": 0.0, "prefill_tokens": 400,
            "draft_loaded": True, "sync": False, "prompts_done": 2}
    none = price_step(plain, StepShape(**base, prompt_gamma=0))
    three = price_step(plain, StepShape(**base, prompt_gamma=3))
    assert not none.draft_prefilled and none.prefill_s == pytest.approx(plain.prefill_time_s(400))
    further = (plain.decode_timing(2, 3, 200.0).draft_s
               - plain.decode_timing(2, 1, 200.0).draft_s)
    assert three.draft_prefilled and further > 0
    assert three.prefill_s == pytest.approx(
        plain.prefill_time_s(400) + plain.draft_prefill_time_s(400) + further)
    # K = 1 proposes with the prompt's pass alone; no draft loaded, nothing of it.
    one = price_step(plain, StepShape(**base, prompt_gamma=1))
    assert one.prefill_s == pytest.approx(plain.prefill_time_s(400)
                                          + plain.draft_prefill_time_s(400))
    off = price_step(plain, StepShape(**{**base, "draft_loaded": False}, prompt_gamma=3))
    assert off.prefill_s == pytest.approx(plain.prefill_time_s(400))


def test_the_simulator_asks_at_a_prompt_only_step_and_the_first_token_waits_for_it() -> None:
    import numpy as np

    from nightjar.trace.trace import Trace

    plain = load_profile(DEFAULT_PROFILE)
    trace = Trace(name="one", seed=0, arrival_s=np.array([0.0]),
                  prompt_tokens=np.array([400], dtype=np.int64),
                  output_tokens=np.array([8], dtype=np.int64),
                  workload=np.array(["sharegpt"], dtype=object), acceptance=np.array([0.6]))
    cfg = SimConfig(gamma_max=3)
    nospec = simulate(trace, plain, "nospec", cfg).requests[0].first_token_s
    fixed = simulate(trace, plain, "fixed:3", cfg).requests[0].first_token_s
    further = (plain.decode_timing(1, 3, 400.0).draft_s
               - plain.decode_timing(1, 1, 400.0).draft_s)
    assert nospec == pytest.approx(plain.prefill_time_s(400))
    assert fixed == pytest.approx(
        plain.prefill_time_s(400) + plain.draft_prefill_time_s(400) + further)
    # The prompt-only step's row keeps the K proposed for the prompt (3), and the first
    # decode step pays no catch-up: the draft's KV already holds the prompt.
    steps = simulate(trace, plain, "fixed:3", cfg).steps
    assert steps[0].batch_size == 0 and steps[0].gamma == 3
    assert steps[1].switch_cost_s == 0.0


@pytest.mark.parametrize("mixed", [True, False])
def test_a_steps_price_is_its_decode_plus_its_prompt_work_bit_for_bit(
    profile: Profile, mixed: bool
) -> None:
    # The bound's recorder prices a step's decode and its prompt work apart and adds
    # them (nightjar.sim.yardstick): that sum must be the engine's price exactly.
    from nightjar.sim.price import StepPricer

    pricer = StepPricer(profile if mixed else load_profile(DEFAULT_PROFILE))
    for n, g, ctx, p, loaded, sync in [
        (1, 0, 100.0, 37, True, True), (8, 3, 900.0, 512, True, False),
        (32, 2, 333.0, 4000, False, False), (200, 4, 2500.0, 61, True, True),
        (5, 0, 64.0, 1, False, True),
    ]:
        drafted = g * n
        whole = pricer.price(n, g, drafted, ctx, p, loaded, sync)
        decode = pricer.price(n, g, drafted, ctx, 0, loaded, sync).total_s
        runs = loaded and (g > 0 or sync)
        target, full = pricer.prompt_s(n, n + drafted, p, runs)
        assert whole.total_s == decode + full
        assert whole.prefill_s == full and whole.draft_prefilled == runs
        assert pricer.price(n, g, drafted, ctx, p, False, False).prefill_s == target
