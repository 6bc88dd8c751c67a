"""How long the measured profile's grid should take, from a few timed warm-up windows.

The grid's time is mostly prompt tokens (every decode window prefills its batch's
prompts; the prefill, mixed and wake windows are prompts) and decode steps, which
cost differently: one rate per engine for each (seconds per prompt token, seconds per
decode step at the smallest and largest batch, linear between) prices every window
the plan will run. (Charging every window its warm-up time per output token, which
carried that window's own prefill, scaled up by context printed 25.2 min for a grid
that took 15.5.)
"""

from __future__ import annotations

from dataclasses import dataclass

from nightjar.live.profiling.grid import ProfilePlan
from nightjar.live.profiling.ladder import requests
from nightjar.live.profiling.session import DRAFT, NODRAFT, SETTLE_S, WAKE_SAMPLES
from nightjar.live.profiling.windows import MIXED_DECODE_PROMPT


@dataclass(frozen=True, slots=True)
class Rates:
    """One engine's measured speed: seconds per prompt token, and per decode step
    (one output token of every request) at batch 1 and at the largest batch."""

    prompt_s: float
    step_1_s: float
    step_max_s: float
    b_max: int

    def step_s(self, b: int) -> float:
        w = (b - 1) / max(self.b_max - 1, 1)
        return self.step_1_s + (self.step_max_s - self.step_1_s) * w


def grid_seconds(plan: ProfilePlan, rates: dict[str, Rates]) -> float:
    """Seconds the plan's repeats, its acceptance window and the sleeps between
    engines should take at these rates (fill and re-measure passes not counted)."""
    nodraft = rates[NODRAFT]
    one = 0.0
    switches = 0
    if not plan.only_mixed:
        for c in plan.contexts:
            for rungs in plan.decode_chains(c):
                prompt = sum(p for p, _ in requests(rungs, c, plan.output_tokens))
                for r in rates.values():
                    one += r.prompt_s * prompt
                    one += sum(plan.output_tokens * r.step_s(b) for b in rungs)
                switches += 2
        for r in rates.values():
            one += r.prompt_s * sum(plan.prefill_lengths)
        wakes = WAKE_SAMPLES * len(plan.wake_pauses)
        one += WAKE_SAMPLES * sum(plan.wake_pauses)
        one += 2 * wakes * (nodraft.prompt_s * plan.wake_tokens + nodraft.step_s(1))
    for b in plan.mixed_batch_sizes:
        one += nodraft.prompt_s * b * MIXED_DECODE_PROMPT
        for n in plan.mixed_tokens:
            one += 4 * nodraft.step_s(b) + nodraft.prompt_s * n
    b_max = max(plan.batch_sizes)
    draft = rates.get(DRAFT, nodraft)
    accept = plan.output_tokens * draft.step_s(b_max) + draft.prompt_s * b_max * min(
        plan.contexts)
    return plan.repeats * (one + switches * SETTLE_S) + accept
