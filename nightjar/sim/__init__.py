"""Discrete-event simulator of an LLM server with adaptive speculative decoding.

Installed as ``nightjar.sim``. Usage::

    from nightjar.profile.profile import load_profile
    from nightjar.trace.trace import load_trace
    from nightjar.sim import SimConfig, simulate, simulate_many

    trace = load_trace("burst")
    profile = load_profile("a100-80gb/vicuna-13b+vicuna-68m")
    result = simulate(trace, profile, "nightjar", SimConfig(seed=0))
    results = simulate_many(trace, profile, ["nospec", "fixed:3", "nightjar"])

Each returns :class:`nightjar.core.records.RunResult` (per-request and per-step
records); deterministic for ``SimConfig.seed``, and the same whether the step loop
is compiled (:data:`COMPILED`) or not.
"""

from nightjar.sim import engine as _engine
from nightjar.sim.engine import SimulationStalled
from nightjar.sim.knobs import (
    AcceptanceModel,
    DraftKVMode,
    ReloadMode,
    SchedulerMode,
    SimConfig,
)
from nightjar.sim.runner import (
    check_policies,
    request_acceptance,
    servable,
    simulate,
    simulate_many,
)
from nightjar.sim.servable import OnUnfit, check_fit, fit_or_refuse

# Whether the step loop runs as C built by mypyc (a regular install: setup.py) or from
# the Python sources (an editable install, or ``NIGHTJAR_COMPILE=0``).
COMPILED: bool = not (_engine.__file__ or "").endswith(".py")

__all__ = [
    "COMPILED",
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
