"""A tiny step loop that drives a policy without the simulator.

Unit tests and the overhead benchmark use it to put policies in situations where
the right answer is known: a synthetic latency model, a batch-size schedule and
per-request acceptance rates. There is no queueing, no memory and no arrival
process; each step is one decide, one sampled outcome and one observe. Like the
live engine, outcomes are delivered ``delay`` steps late (after the next decide).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from nightjar.core.estimators import expected_tokens
from nightjar.core.policy import Policy
from nightjar.core.types import LatencyModel, StepContext, StepOutcome

BatchSchedule = Callable[[int], int]  # step index -> batch size
AlphaSchedule = Callable[[int, int], Sequence[float]]  # (step, batch size) -> rates
PrefillSchedule = Callable[[int, int], int]  # (step, gamma that runs) -> prompt tokens


@dataclass
class LoopTrace:
    """What happened, step by step: enough for tests to assert on."""

    batch: list[int] = field(default_factory=list)
    gamma: list[int] = field(default_factory=list)  # largest per-request length
    decision: list[int | list[int]] = field(default_factory=list)
    step_time_s: list[float] = field(default_factory=list)
    emitted: list[int] = field(default_factory=list)
    switch_cost_s: list[float] = field(default_factory=list)

    def toggles(self) -> int:
        """Number of 0 <-> >0 transitions of the batch gamma."""
        return sum((a == 0) != (b == 0) for a, b in zip(self.gamma, self.gamma[1:], strict=False))

    def share(self, gamma: int, start: int = 0, stop: int | None = None) -> float:
        window = self.gamma[start:stop]
        return sum(g == gamma for g in window) / max(len(window), 1)

    def total_time_s(self) -> float:
        return sum(self.step_time_s)


def run_loop(
    policy: Policy,
    latency: LatencyModel,
    batch: BatchSchedule,
    alpha: AlphaSchedule,
    steps: int,
    *,
    gamma_max: int = 4,
    seed: int = 0,
    switch_cost_s: float = 0.0,
    delay: int = 1,
    context_len: float = 512.0,
    request_info: bool = True,
    prefill: PrefillSchedule | None = None,
    prefill_s: Callable[[int], float] = lambda n: 0.02 + 2e-5 * n,
    waiting: int = 0,
) -> LoopTrace:
    """Run ``steps`` steps; a gamma > 0 step right after a gamma = 0 step pays ``switch_cost_s``.

    ``prefill(t, g)`` gives the prompt tokens admitted in step ``t`` (which may depend
    on the gamma that runs, to confound an arm with the load); they add
    ``prefill_s(tokens)`` to the step's time. ``waiting`` requests stand in the queue
    at every step (none are admitted: the batch follows ``batch``).

    Acceptance follows the geometric law the simulator uses: a request with rate
    ``a`` drafting ``g`` tokens accepts ``min(floor(ln U / ln a), g)`` of them.
    """
    rng = np.random.default_rng(seed)
    out = LoopTrace()
    pending: deque[StepOutcome] = deque()
    off = False
    for t in range(steps):
        b = batch(t)
        rates = np.clip(np.asarray(alpha(t, b), dtype=float), 1e-9, 0.999)
        ids = list(range(b))
        ctx = StepContext(
            now=float(t), batch_size=b, num_waiting=waiting, kv_free_blocks=1000,
            kv_total_blocks=1000, draft_resident=True, gamma_max=gamma_max,
            mean_context_len=context_len,
            request_ids=ids if request_info else None,
            acceptance_estimates=rates.tolist() if request_info else None,
            true_acceptance=rates.tolist() if request_info else None,
        )
        raw = policy.decide(ctx)
        while len(pending) >= delay and pending:
            policy.observe(pending.popleft())
        gammas = np.full(b, raw) if isinstance(raw, int) else np.asarray(raw, dtype=np.int64)
        gammas = np.clip(gammas, 0, gamma_max)
        g = int(gammas.max())
        k = np.minimum(np.floor(np.log(rng.random(b)) / np.log(rates)), gammas).astype(int)
        switch = switch_cost_s if (g > 0 and off) else 0.0
        p = prefill(t, g) if prefill is not None else 0
        step = latency.step_time_s(b, g, context_len) + switch + (prefill_s(p) if p else 0.0)
        emitted = int(k.sum()) + b
        off = g == 0
        pending.append(StepOutcome(
            gamma=g, batch_size=b, step_time_s=step, drafted=int(gammas.sum()),
            accepted=int(k.sum()), emitted=emitted, switch_cost_s=switch, prefill_tokens=p,
            request_ids=ids, per_request_accepted=k.tolist(),
            per_request_drafted=gammas.tolist(),
        ))
        if delay == 0:
            policy.observe(pending.popleft())
        out.batch.append(b)
        out.gamma.append(g)
        out.decision.append(raw if isinstance(raw, int) else list(raw))
        out.step_time_s.append(step)
        out.emitted.append(emitted)
        out.switch_cost_s.append(switch)
    return out


class KneeLatency:
    """A step-time model with a memory-bound floor and a compute-bound slope.

    ``T(B, g) = base + draft_s * g + per_token_s * max(0, B * (g + 1) - knee)``:
    verifying is free until the batch's tokens pass ``knee``, the draft costs
    ``draft_s`` per drafted position. Small batches then want a long gamma, large
    batches none, which is the trade-off Nightjar learns.
    """

    def __init__(
        self, base_s: float = 0.010, draft_s: float = 0.0008,
        per_token_s: float = 0.0001, knee: int = 64,
    ) -> None:
        self.base_s, self.draft_s, self.per_token_s, self.knee = base_s, draft_s, per_token_s, knee

    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float:
        over = max(0, batch_size * (gamma + 1) - self.knee)
        return self.base_s + self.draft_s * gamma + self.per_token_s * over

    def best_gamma(self, batch_size: int, alpha: float, gamma_max: int = 4) -> int:
        """The gamma minimising time per token for a batch of equal rates ``alpha``."""
        return min(
            range(gamma_max + 1),
            key=lambda g: self.step_time_s(batch_size, g, 0.0) / expected_tokens(alpha, g),
        )
