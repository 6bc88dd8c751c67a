"""Long contexts: the richer StepContext, nightjar+ keyed on (batch, context), its
objectives and KV-pressure limit, and the joint gamma/residency decision."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import simpy

from nightjar.core.driver import StepDriver
from nightjar.core.estimators import context_bucket_of, expected_tokens
from nightjar.core.memory import Action, MemoryConfig, MemoryController
from nightjar.core.policy import PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.nightjar_plus import NightjarPlusPolicy
from nightjar.policies.objective import lookahead_top, parse_objective
from nightjar.policies.registry import make_policy
from nightjar.profile.profile import Profile, load_profile
from nightjar.sim import SimConfig
from nightjar.sim.engine import Engine
from nightjar.sim.ledger import Ledger
from nightjar.trace.trace import load_trace

H100 = "h100-80gb/llama-3.1-8b+llama-3.2-1b"
ALPHA = 0.6
SHORT, LONG = 512.0, 16384.0
BIG_B = 512


@pytest.fixture(scope="module")
def h100() -> Profile:
    return load_profile(H100)


def best_gamma(p: Profile, b: int, c: float) -> int:
    return max(range(5), key=lambda g: expected_tokens(ALPHA, g) / p.step_time_s(b, g, c))


def ctx_at(b: int, c: float, now: float = 0.0, **kw: Any) -> StepContext:
    return StepContext(now=now, batch_size=b, num_waiting=0, kv_free_blocks=10_000,
                       kv_total_blocks=20_000, draft_resident=True, gamma_max=4,
                       mean_context_len=c, max_context_len=c, **kw)


def test_context_buckets_are_powers_of_two_above_1k() -> None:
    assert [context_bucket_of(c) for c in (0, 1023, 1024, 2047, 2048, 16384, 32767, 40000)] == [
        0, 0, 1, 1, 2, 5, 5, 6]


def test_the_profile_says_long_contexts_flip_the_answer_at_high_batch(h100: Profile) -> None:
    # The premise of the tests below (MagicDec's finding, in the roofline profile):
    # at B = 512 speculation does not pay at short contexts and does at long ones.
    assert best_gamma(h100, BIG_B, SHORT) == 0
    assert best_gamma(h100, BIG_B, LONG) > 0


def learn(pol: NightjarPlusPolicy, truth: Profile, steps: int) -> dict[float, list[int]]:
    """Alternate short- and long-context batches of BIG_B; the outcome is the true
    step time and the mean accepted drafts. Returns the decisions per context."""
    seen: dict[float, list[int]] = {SHORT: [], LONG: []}
    for i in range(steps):
        c = SHORT if (i // 20) % 2 == 0 else LONG
        g = pol.decide(ctx_at(BIG_B, c, now=i * 0.05))
        seen[c].append(g)
        accepted = round(BIG_B * (expected_tokens(ALPHA, g) - 1.0))
        pol.observe(StepOutcome(g, BIG_B, truth.step_time_s(BIG_B, g, c), g * BIG_B,
                                accepted, accepted + BIG_B))
    return seen


def test_profile_less_nightjar_plus_learns_speculation_at_long_contexts_only(
    h100: Profile,
) -> None:
    # Without a profile, step times are learned per (batch, context) bucket: the same
    # batch size gets gamma 0 at short contexts and speculation at long ones.
    pol = NightjarPlusPolicy(PolicyEnv(gamma_max=4, seed=3, acceptance_prior=ALPHA))
    seen = learn(pol, h100, 4000)
    late_short, late_long = seen[SHORT][-500:], seen[LONG][-500:]
    assert np.mean([g == 0 for g in late_short]) > 0.9
    assert np.mean([g > 0 for g in late_long]) > 0.9


def test_batch_keyed_cells_still_tell_the_contexts_apart_through_the_model(
    h100: Profile,
) -> None:
    # Keyed on batch alone, the cells mix both contexts; the step model's own context
    # feature (B * context: the KV the step reads) still separates them, so the
    # ablation now isolates the cells, not the model's knowledge of context.
    pol = NightjarPlusPolicy(PolicyEnv(gamma_max=4, seed=3, acceptance_prior=ALPHA),
                             by_context=False)
    seen = learn(pol, h100, 4000)
    assert np.mean([g == 0 for g in seen[SHORT][-500:]]) > 0.9
    assert np.mean([g > 0 for g in seen[LONG][-500:]]) > 0.9


def test_with_the_profile_as_prior_it_speculates_at_long_contexts_only(h100: Profile) -> None:
    pol = make_policy("nightjar+", PolicyEnv(gamma_max=4, seed=0, latency=h100,
                                             acceptance_prior=ALPHA))
    short = [pol.decide(ctx_at(BIG_B, SHORT)) for _ in range(200)]
    long_ = [pol.decide(ctx_at(BIG_B, LONG)) for _ in range(200)]
    assert np.mean([g == 0 for g in short]) > 0.95
    assert np.mean([g > 0 for g in long_]) > 0.95


def test_lengths_whose_lookahead_does_not_fit_are_not_chosen(h100: Profile) -> None:
    tight = ctx_at(16, 1000.0, kv_block_size=16)
    assert lookahead_top(replace(tight, kv_free_blocks=2), 5) == 2  # 32 slots: 2 per request
    assert lookahead_top(replace(tight, kv_free_blocks=0), 5) == 1  # gamma 0 always remains
    assert lookahead_top(replace(tight, kv_block_size=0, kv_free_blocks=0), 5) == 5  # unknown
    pol = make_policy("nightjar+:kv-limit", PolicyEnv(gamma_max=4, seed=0, latency=h100))
    assert pol.decide(replace(ctx_at(4, 1000.0), kv_free_blocks=1000, kv_block_size=16)) > 1
    assert pol.decide(replace(ctx_at(4, 1000.0), kv_free_blocks=0, kv_block_size=16)) == 0
    # Off by default (it cost throughput on the overloaded bundled runs).
    default = make_policy("nightjar+", PolicyEnv(gamma_max=4, seed=0, latency=h100))
    assert default.decide(replace(ctx_at(4, 1000.0), kv_free_blocks=0, kv_block_size=16)) > 0


@pytest.mark.parametrize("arg", ["bogus", "slo=", "slo=1", "slo=a,b", "slo=0,0.1", "slo=1,inf"])
def test_a_bad_objective_is_one_input_error(arg: str) -> None:
    with pytest.raises(NightjarInputError, match="objective"):
        make_policy(f"nightjar+:{arg}", PolicyEnv())


def test_objective_parsing() -> None:
    assert parse_objective("p", None).name == "latency"
    slo = parse_objective("p", "slo=1.5,0.05").slo
    assert slo is not None and (slo.ttft_s, slo.tpot_s) == (1.5, 0.05)


def test_slo_objective_spends_tpot_headroom_on_short_steps_while_requests_wait(
    h100: Profile,
) -> None:
    env = PolicyEnv(gamma_max=4, seed=0, latency=h100, acceptance_prior=ALPHA)
    b, c = 8, 1000.0
    waiting = replace(ctx_at(b, c), num_waiting=3, waiting_tokens=600, kv_block_size=16)
    latency_pick = make_policy("nightjar+", env).decide(waiting)
    assert latency_pick > 0  # at B = 8 speculation pays per token
    # A loose TPOT: gamma 0 meets it and is the shortest step, so the queue goes first.
    assert make_policy("nightjar+:slo=2,1", env).decide(waiting) == 0
    # A TPOT only speculation meets: it keeps speculating.
    t0 = h100.step_time_s(b, 0, c)
    tight = make_policy(f"nightjar+:slo=2,{t0 * 0.9}", env)
    assert tight.decide(waiting) > 0
    # A policy already speculating switches to the short step once requests wait
    # (the per-token hysteresis must not keep it on the cheaper-per-token arm).
    running = make_policy("nightjar+:slo=2,1", env)
    idle = replace(waiting, num_waiting=0, waiting_tokens=0)
    assert running.decide(idle) == latency_pick
    assert [running.decide(waiting) for _ in range(3)] == [0, 0, 0]
    # Nothing waits, or the queue waits for blocks: the latency objective.
    loose = make_policy("nightjar+:slo=2,1", env)
    assert loose.decide(replace(waiting, num_waiting=0, waiting_tokens=0)) == latency_pick
    full = replace(waiting, waiting_tokens=10_000 * 16 + 1)
    assert loose.decide(full) == latency_pick


def pressured(free: int, waiting: int, prompt: int, b: int = 38, c: float = 9000.0,
              preempted: int = 0) -> StepContext:
    return replace(ctx_at(b, c), num_waiting=waiting, kv_free_blocks=free,
                   waiting_tokens=waiting * prompt, kv_block_size=16,
                   num_preempted_waiting=preempted)


def test_capacity_gain_prices_the_drafts_blocks_only_when_capacity_binds(h100: Profile) -> None:
    draft = h100.memory.kv_blocks(False) - h100.memory.kv_blocks(True)
    driver = StepDriver(make_policy("fixed:2", PolicyEnv()),
                        MemoryController(MemoryConfig(), draft), h100)
    assert driver.capacity_gain(pressured(free=5000, waiting=2, prompt=8700)) is None  # fits
    assert driver.capacity_gain(pressured(free=5000, waiting=0, prompt=0)) is None
    # Short contexts at a large batch: the draft's ~6.6k blocks admit ~50 more
    # requests, worth more than speculation, which barely pays at B = 128.
    gain = driver.capacity_gain(pressured(free=10, waiting=50, prompt=500, b=128, c=1000.0))
    assert gain is not None and gain > 0.0
    # Long contexts: the step is KV-bound, so a bigger batch adds little throughput
    # while speculation still pays (MagicDec): the draft keeps its blocks.
    gain = driver.capacity_gain(pressured(free=10, waiting=40, prompt=8700, b=38, c=9000.0))
    assert gain is not None and gain < 0.0
    # On a prefill-heavy load the draft also prefills every prompt: the same state
    # prices the blocks higher once the steps show ~24 prompt tokens per output token.
    before = gain
    for _ in range(500):
        driver.finish(StepOutcome(2, 38, 0.05, 76, 46, 84, prefill_tokens=2000))
    after = driver.capacity_gain(pressured(free=10, waiting=40, prompt=8700, b=38, c=9000.0))
    assert after is not None and after > before
    # A small draft footprint admits nobody: nothing to price.
    small = StepDriver(make_policy("fixed:2", PolicyEnv()),
                       MemoryController(MemoryConfig(), 5), h100)
    assert small.capacity_gain(pressured(free=10, waiting=40, prompt=8700)) is None


def test_joint_rule_offloads_while_the_policy_still_speculates(h100: Profile) -> None:
    draft = h100.memory.kv_blocks(False) - h100.memory.kv_blocks(True)
    for enabled, expect in ((True, Action.START_OFFLOAD), (False, Action.NONE)):
        cfg = MemoryConfig(min_dwell_s=0.0, offload_on_capacity=enabled)
        driver = StepDriver(make_policy("fixed:2", PolicyEnv()),
                            MemoryController(cfg, draft), h100)
        load = pressured(free=10, waiting=50, prompt=500, b=128, c=1000.0)
        actions = [driver.plan(replace(load, now=0.1 * i)).action
                   for i in range(cfg.k_offload)]
        assert actions[-1] is expect and actions[:-1] == [Action.NONE] * (cfg.k_offload - 1)
        assert driver.controller.capacity_offloads == (1 if enabled else 0)


def test_the_simulator_fills_the_new_context_fields(h100: Profile) -> None:
    trace = load_trace("longctx-rag")
    seen: list[StepContext] = []
    policy = make_policy("fixed:2", PolicyEnv())
    decide = policy.decide

    def spy(ctx: StepContext) -> Any:
        seen.append(ctx)
        return decide(ctx)

    policy.decide = spy  # type: ignore[method-assign]
    env = simpy.Environment()
    n = 120
    ledger = Ledger(trace.arrival_s[:n], trace.prompt_tokens[:n], trace.output_tokens[:n],
                    np.full(n, ALPHA))
    engine = Engine(env, ledger, h100, policy, SimConfig())
    env.process(engine.run())
    env.run()
    assert seen and all(c.kv_block_size == h100.memory.block_size for c in seen)
    # A prompt-only step is asked too (as vLLM's scheduler asks), with no decoding
    # request: its contexts are 0.
    assert all(c.max_context_len >= c.mean_context_len >= 0 for c in seen)
    assert all(c.mean_context_len > 0 for c in seen if c.max_context_len > 0)
    assert max(c.max_context_len for c in seen) > 16384  # long contexts reach the policy
    assert all((c.num_waiting == 0) == (c.waiting_tokens == 0) for c in seen)
    assert all(0 <= c.num_preempted_waiting <= c.num_waiting for c in seen)
    assert all(0.0 <= c.kv_used_fraction <= 1.0 for c in seen)
    assert any(c.num_waiting for c in seen)  # the queue is exercised, not only empty


def test_live_flag_turns_the_joint_rule_off_and_needs_offload_on() -> None:
    from nightjar.cli import build_parser
    from nightjar.commands.live import memory_settings

    parse = build_parser().parse_args
    on = memory_settings(parse(["live", "--model", "m", "--offload", "on"]))
    assert on is not None and on.offload_on_capacity
    off = memory_settings(parse(["live", "--model", "m", "--offload", "on",
                                 "--no-offload-on-capacity"]))
    assert off is not None and not off.offload_on_capacity
    with pytest.raises(NightjarInputError, match="add --offload on"):
        memory_settings(parse(["live", "--model", "m", "--no-offload-on-capacity"]))


@pytest.mark.parametrize("spec", ["nightjar+", "nightjar+:batch-keyed"])
def test_profile_less_nightjar_plus_learns_no_zero_step_time_from_a_prefill_heavy_step(
    spec: str,
) -> None:
    # A mixed step shorter than its estimated prefill leaves no decode time. Learned
    # as 0 in a new bucket, it made every loss there 0 and decide divided by it
    # (longctx-mix, --prior none, seed 0).
    pol = make_policy(spec, PolicyEnv(gamma_max=4, seed=0, acceptance_prior=ALPHA))
    assert isinstance(pol, NightjarPlusPolicy)
    for i in range(3):  # decode time at B = 8, then prefill learned on top of it
        pol.decide(ctx_at(8, SHORT, now=i * 0.05))
        pol.observe(StepOutcome(0, 8, 0.02, 0, 0, 8))
    for i in range(3):
        pol.decide(ctx_at(8, SHORT, now=1.0 + i * 0.05))
        pol.observe(StepOutcome(0, 8, 0.22, 0, 0, 8, prefill_tokens=4000))
    # B = 64 is a new bucket; this step is all prefill by the estimate.
    pol.decide(ctx_at(64, SHORT, now=2.0))
    pol.observe(StepOutcome(0, 64, 0.05, 0, 0, 64, prefill_tokens=4000))
    assert all(loss > 0.0 for loss in pol.losses(64, SHORT, pol.step_times(64, SHORT)))
    for i in range(500):  # exploration divides by the best arm's loss
        pol.decide(ctx_at(64, SHORT, now=3.0 + i * 0.05))
