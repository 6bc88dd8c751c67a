"""Run policies over a trace: ``simulate`` for one, ``simulate_many`` for a comparison."""

from __future__ import annotations

import dataclasses
import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np
import simpy

from nightjar.core.draft_kv import SyncedDraftLatency
from nightjar.core.drafter import offload_refusal
from nightjar.core.policy import PolicyEnv
from nightjar.core.records import RunResult
from nightjar.core.variant import split_variant
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import make_policy
from nightjar.profile.priors import gives_acceptance, parse_prior
from nightjar.profile.profile import Profile
from nightjar.sim.engine import Engine
from nightjar.sim.knobs import DraftKVMode, SimConfig
from nightjar.sim.ledger import Ledger
from nightjar.sim.servable import Fit, OnUnfit, fit_or_refuse
from nightjar.trace.trace import Trace
from nightjar.trace.workloads import get_workload

Progress = Callable[[float], None]


def request_acceptance(trace: Trace, profile: Profile, seed: int) -> np.ndarray:
    """Each request's true acceptance rate, identical for every policy of a run.

    A rate the trace fixes wins; otherwise it is drawn from the profile's
    distribution for the request's workload (this draft on this target), falling
    back to the workload's own default.
    """
    rng = np.random.default_rng([seed, 7])
    alpha = np.empty(len(trace))
    for name in sorted(set(trace.workload.tolist())):
        mask = trace.workload == name
        known = profile.acceptance(name)
        mean, conc = known if known is not None else (None, None)
        alpha[mask] = get_workload(name).sample_acceptance(rng, int(mask.sum()), mean, conc)
    fixed = ~np.isnan(trace.acceptance)
    alpha[fixed] = trace.acceptance[fixed]
    return alpha


def acceptance_prior(trace: Trace, profile: Profile) -> float | None:
    """The profile's mean acceptance for the trace's most common workload, if known.

    What a deployment would know before serving: the draft's measured acceptance on
    that kind of traffic, not any request's own rate.
    """
    names, counts = np.unique(trace.workload.astype(str), return_counts=True)
    known = profile.acceptance(str(names[np.argmax(counts)])) if len(names) else None
    return known[0] if known is not None else None


def policy_env(
    trace: Trace, profile: Profile, cfg: SimConfig, prior: str = "exact"
) -> PolicyEnv:
    """What every policy of a run is told about its deployment.

    ``prior`` is the latency model the policies plan with
    (:func:`nightjar.profile.priors.parse_prior`); the oracle always gets the exact profile
    as ``truth``. Under ``none`` the policies get no acceptance rate either: they
    learn it from their first speculating steps.
    """
    latency = parse_prior(prior, profile)
    if cfg.draft_kv_mode is DraftKVMode.SYNC and isinstance(latency, Profile):
        # In sync mode the engine charges a draft forward on every gamma 0 step
        # (Engine._latency); the policy's prior must price the same step.
        latency = SyncedDraftLatency(latency)
    return PolicyEnv(
        gamma_max=cfg.gamma_max, seed=cfg.seed, latency=latency,
        truth=profile,
        acceptance_prior=acceptance_prior(trace, profile) if gives_acceptance(prior) else None,
        drafter=profile.drafter,
    )


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The cycle collector off while a run steps and lists its requests. Those allocate
    a record per step and per request, and next to no cycles, so each collection only
    rescanned the growing lists: 5-10% of a long run's time, for the same peak memory."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def check_policies(
    specs: Sequence[str], trace: Trace, profile: Profile, config: SimConfig
) -> None:
    """Build every policy once, as a run would, so that a bad spec anywhere in the list
    fails before the first simulation starts."""
    env = policy_env(trace, profile, config)
    for spec in specs:
        with_variant(config, spec, profile)
        make_policy(spec, env)


def servable(trace: Trace, profile: Profile, config: SimConfig,
             on_unfit: OnUnfit = OnUnfit.REFUSE) -> Fit:
    """The check :func:`simulate` makes before its first step (:func:`fit_or_refuse`,
    the profile's ``max_model_len`` pin included), for callers that check every input
    before any run starts."""
    return fit_or_refuse(trace, profile, config, on_unfit)


def with_variant(cfg: SimConfig, spec: str, profile: Profile) -> SimConfig:
    """``cfg`` with the memory setting a spec's run variant forces
    (:mod:`nightjar.core.variant`); ``on`` with a drafter that has no weights is refused."""
    _, offload = split_variant(spec)
    if offload is None:
        return cfg
    if offload == "on":
        why = offload_refusal(profile.drafter)
        if why is not None:
            raise NightjarInputError(f"policy {spec!r}: {why} (profile {profile.name})")
    return dataclasses.replace(cfg, offload=offload == "on")


def simulate(
    trace: Trace,
    profile: Profile,
    policy: str,
    config: SimConfig | None = None,
    progress: Progress | None = None,
    alpha: np.ndarray | None = None,
    on_unfit: OnUnfit = OnUnfit.REFUSE,
    prior: str = "exact",
) -> RunResult:
    """Simulate one policy (a spec such as ``"fixed:3"``) over ``trace``.

    Deterministic for ``config.seed``. ``progress`` is called with the simulated
    time after each step. Requests that can never fit the KV pool
    (:mod:`nightjar.sim.servable`) are refused with a NightjarInputError, or with
    ``on_unfit=SKIP`` left out and counted in ``extra["rejected_requests"]``; the
    others keep their request ids and acceptance rates. ``prior`` is the latency model
    the policy plans with (:func:`nightjar.profile.priors.parse_prior`); the simulation always
    runs ``profile``. A request longer than the profile's ``max_model_len`` pin (or
    ``config.max_model_len``) is one that can never run.
    """
    # A batch past the profile's largest is priced along its last segment
    # (nightjar.profile.profile), so the engine keeps its own batch cap, as live.
    cfg = with_variant(config or SimConfig(), policy, profile)
    fit = fit_or_refuse(trace, profile, cfg, on_unfit)
    if alpha is None:
        alpha = request_acceptance(trace, profile, cfg.seed)
    served = fit.apply(trace)
    if fit.rejected.size:
        alpha = alpha[fit.kept]
    env = simpy.Environment()
    ledger = Ledger(served.arrival_s, served.prompt_tokens, served.output_tokens, alpha,
                    served.speculate)
    pol = make_policy(policy, policy_env(trace, profile, cfg, prior))
    engine = Engine(env, ledger, profile, pol, cfg, progress)
    with _collector_paused():
        started = time.perf_counter()
        env.process(engine.run())
        env.run()
        wall = time.perf_counter() - started
        requests = ledger.records()
    result = RunResult(
        policy=policy, engine="sim", trace=trace.name, profile=profile.name, seed=cfg.seed,
        duration_s=float(env.now), requests=requests, steps=engine.steps,
    )
    if fit.rejected.size:
        for record, rid in zip(result.requests, fit.kept.tolist(), strict=True):
            record.request_id = rid
    result.extra["rejected_requests"] = float(fit.rejected.size)
    result.extra["capped_requests"] = float(fit.capped.size)
    result.extra.update(engine.draft.summary())
    result.extra["context_clamped_steps"] = float(engine.context_clamped_steps)
    result.extra["wall_s"] = wall
    result.extra.update(engine.yardstick.summary())
    return result


def simulate_many(
    trace: Trace,
    profile: Profile,
    policies: Sequence[str],
    config: SimConfig | None = None,
    progress: Callable[[str, float], None] | None = None,
    on_unfit: OnUnfit = OnUnfit.REFUSE,
    prior: str = "exact",
) -> list[RunResult]:
    """Every policy on the same arrivals and the same per-request acceptance rates."""
    cfg = config or SimConfig()
    alpha = request_acceptance(trace, profile, cfg.seed)
    results = []
    for spec in policies:
        cb = (lambda t, s=spec: progress(s, t)) if progress else None
        results.append(simulate(trace, profile, spec, cfg, cb, alpha, on_unfit, prior))
    return results
