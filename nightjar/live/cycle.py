"""``cycle:G1,G2,...[/N]``: a diagnostic policy that walks a gamma sequence.

Each value is held for N consecutive decisions (default 3), then the next one;
the sequence repeats. It exists to prove that gamma really changes per step and
that output stays lossless when it does (tests and smoke runs); it learns nothing.
``decode-cycle:...`` (the measured profiler's) holds each value for N observed pure
decode steps instead: steps that prefill prompts do not move it, so a window's
cycle starts at its first pure decode step however many steps its prompts take.
Registered when nightjar.live is used (the scheduler imports this module).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import register


@dataclass
class CyclePolicy:
    gammas: list[int]
    hold: int
    name: str = "cycle"
    _calls: int = field(default=0)

    def decide(self, ctx: StepContext) -> int:
        gamma = self.gammas[(self._calls // self.hold) % len(self.gammas)]
        self._calls += 1
        return gamma

    def observe(self, outcome: StepOutcome) -> None:
        pass


@dataclass
class DecodeCyclePolicy:
    """Like :class:`CyclePolicy`, counting observed pure decode steps, not decisions."""

    gammas: list[int]
    hold: int
    name: str = "decode-cycle"
    _decodes: int = field(default=0)

    def decide(self, ctx: StepContext) -> int:
        return self.gammas[(self._decodes // self.hold) % len(self.gammas)]

    def observe(self, outcome: StepOutcome) -> None:
        if outcome.batch_size and not outcome.prefill_tokens:
            self._decodes += 1


def parse_cycle(arg: str | None, name: str = "cycle") -> tuple[list[int], int]:
    if not arg:
        raise NightjarInputError(f"policy '{name}' needs gammas, e.g. {name}:3,0,2/4")
    seq, _, hold_s = arg.partition("/")
    try:
        gammas = [int(g) for g in seq.split(",")]
        hold = int(hold_s) if hold_s else 3
    except ValueError:
        raise NightjarInputError(f"policy '{name}:{arg}': expected G1,G2,.../N integers") from None
    if not gammas or min(gammas) < 0 or hold < 1:
        raise NightjarInputError(f"policy '{name}:{arg}': gammas must be >= 0 and N >= 1")
    return gammas, hold


@register(
    "cycle", "diagnostic: walk a gamma sequence, N steps each (cycle:3,0,2/4)", default_specs=()
)
def _cycle(arg: str | None, env: PolicyEnv) -> Policy:
    gammas, hold = parse_cycle(arg)
    return CyclePolicy(gammas, hold)


@register(
    "decode-cycle",
    "diagnostic: walk a gamma sequence, N pure decode steps each (the profiler's)",
    default_specs=(),
)
def _decode_cycle(arg: str | None, env: PolicyEnv) -> Policy:
    gammas, hold = parse_cycle(arg, "decode-cycle")
    return DecodeCyclePolicy(gammas, hold)
