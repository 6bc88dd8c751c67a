"""Discrete-event simulator of an LLM server with adaptive speculative decoding.

Installed as ``nightjar.sim``. Usage::

    from nightjar.profile.model import load_profile
    from nightjar.trace.model import load_trace
    from nightjar.sim import SimConfig, simulate, simulate_many

    trace = load_trace("burst")
    profile = load_profile("a100-80gb/vicuna-13b+vicuna-68m")
    result = simulate(trace, profile, "nightjar", SimConfig(seed=0))
    results = simulate_many(trace, profile, ["nospec", "fixed:3", "nightjar"])

Each returns :class:`nightjar.core.records.RunResult` (per-request and per-step
records); deterministic for ``SimConfig.seed``.
"""

from nightjar.sim.config import (
    AcceptanceModel,
    DraftKVMode,
    ReloadMode,
    SchedulerMode,
    SimConfig,
)
from nightjar.sim.engine import SimulationStalled
from nightjar.sim.runner import (
    check_policies,
    request_acceptance,
    servable,
    simulate,
    simulate_many,
)
from nightjar.sim.servable import OnUnfit, check_fit, fit_or_refuse

__all__ = [
    "AcceptanceModel",
    "DraftKVMode",
    "OnUnfit",
    "ReloadMode",
    "SchedulerMode",
    "SimConfig",
    "SimulationStalled",
    "check_fit",
    "check_policies",
    "fit_or_refuse",
    "request_acceptance",
    "servable",
    "simulate",
    "simulate_many",
]
