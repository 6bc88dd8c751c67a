"""The policy protocol: what every policy implements, what it is told when built, and
the clamp both engines apply to its decision. The registry that turns ``"fixed:3"``
into a policy is :mod:`nightjar.policies.registry`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from nightjar.core.types import Decision, LatencyModel, StepContext, StepOutcome


@runtime_checkable
class Policy(Protocol):
    """Chooses the speculation length each step and learns from what happened.

    ``decide`` must be cheap (microseconds) and deterministic given the policy's
    seed and the sequence of contexts and outcomes it has seen.

    Optional class attribute ``uses_request_info = True``: the engine then fills the
    per-request fields of contexts and outcomes (ids, acceptance estimates, and in
    the simulator the true rates); others skip that per-step cost. Optional class
    attribute ``ignores_context = True``: ``decide`` reads nothing of its context, so
    the simulator need not count what a step will admit (``batch_size``) for it.
    """

    name: str

    def decide(self, ctx: StepContext) -> Decision: ...

    def observe(self, outcome: StepOutcome) -> None: ...


@dataclass(frozen=True, slots=True)
class PolicyEnv:
    """What a policy may know about its deployment when it is built."""

    gamma_max: int = 4
    seed: int = 0
    # The hardware's step latency (a profile), where one exists; policies may use
    # it as a prior (``nightjar+``, ``dsd``) or as ground truth (``oracle``).
    latency: LatencyModel | None = None
    # The exact step latency of the simulated hardware, where ``latency`` is a
    # different (wrong or absent) prior. Only the ``oracle`` yardstick reads it.
    truth: LatencyModel | None = None
    # Prior mean acceptance rate of the draft on this workload, if known.
    acceptance_prior: float | None = None
    # Whether the engine can run a different length per request (the simulator can,
    # vLLM cannot).
    per_request: bool = True
    # The drafter's kind (``nightjar.core.drafter.DRAFTERS``): whether turning
    # speculation back on pays a catch-up (a drafter with its own KV does; n-gram
    # and suffix lookups do not), and whether there is anything to offload.
    drafter: str = "draft_model"


PolicyFactory = Callable[[str | None, PolicyEnv], Policy]
