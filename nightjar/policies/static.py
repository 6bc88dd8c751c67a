"""Non-adaptive policies: no speculation, a fixed length, and vLLM's static table."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import register

_DIGITS = re.compile(r"[0-9]{1,9}")


@dataclass
class FixedPolicy:
    """Always the same gamma (0 means no speculation)."""

    gamma: int
    name: str = "fixed"
    # decide reads nothing of its context (nightjar.core.policy.Policy): a subclass
    # whose decide reads it sets this False.
    ignores_context = True

    def decide(self, ctx: StepContext) -> int:
        return self.gamma

    def observe(self, outcome: StepOutcome) -> None:
        pass


@dataclass
class SchedulePolicy:
    """gamma looked up from batch-size ranges, like vLLM's static ``dynamic_sd`` table.

    ``rows`` holds ``(lo, hi, gamma)`` with ``hi = None`` for an open upper end;
    batch sizes no row covers get gamma 0.
    """

    rows: list[tuple[int, int | None, int]]
    name: str = "schedule"
    _cache: dict[int, int] = field(default_factory=dict)

    def decide(self, ctx: StepContext) -> int:
        b = ctx.batch_size
        hit = self._cache.get(b)
        if hit is None:
            hit = next(
                (g for lo, hi, g in self.rows if lo <= b and (hi is None or b <= hi)), 0
            )
            self._cache[b] = hit
        return hit

    def observe(self, outcome: StepOutcome) -> None:
        pass


def _parse_gamma(text: str, spec: str, gamma_max: int) -> int:
    """A gamma in ``0..gamma_max``: a larger one would run as gamma_max under its own
    label, so it is refused rather than clamped."""
    if not _DIGITS.fullmatch(text.strip()):
        raise NightjarInputError(f"policy {spec!r}: gamma {text!r} is not an integer >= 0")
    gamma = int(text)
    if gamma > gamma_max:
        raise NightjarInputError(
            f"policy {spec!r}: gamma {gamma} exceeds gamma_max {gamma_max} (--gamma-max)"
        )
    return gamma


def parse_schedule(arg: str, gamma_max: int) -> list[tuple[int, int | None, int]]:
    """Parse ``1-16:3,17-64:1,65-:0`` into sorted, non-overlapping rows."""
    spec = f"schedule:{arg}"
    if not arg.strip():
        raise NightjarInputError(
            f"policy {spec!r}: no rows after ':' (e.g. schedule:{VLLM_DEFAULT_SCHEDULE}, "
            "or plain 'schedule' for that default)"
        )
    rows: list[tuple[int, int | None, int]] = []
    for part in arg.split(","):
        rng, sep, g = part.strip().partition(":")
        lo_s, dash, hi_s = rng.partition("-")
        # ASCII digits only: str.isdigit() also accepts '²', which int() refuses.
        if not sep or not _DIGITS.fullmatch(lo_s) or (hi_s and not _DIGITS.fullmatch(hi_s)):
            raise NightjarInputError(
                f"policy {spec!r}: bad range {part.strip()!r}; expected LO-HI:GAMMA or LO-:GAMMA"
            )
        lo = int(lo_s)
        hi = int(hi_s) if hi_s else (None if dash else lo)
        if lo < 1 or (hi is not None and hi < lo):
            raise NightjarInputError(f"policy {spec!r}: empty or invalid range {rng!r}")
        rows.append((lo, hi, _parse_gamma(g, spec, gamma_max)))
    rows.sort(key=lambda r: r[0])
    for (_, hi, _g), (lo2, _, _g2) in itertools.pairwise(rows):
        if hi is None or hi >= lo2:
            raise NightjarInputError(f"policy {spec!r}: ranges overlap at batch size {lo2}")
    return rows


@register(
    "nospec",
    "never speculate: served with no draft loaded (nospec:resident keeps it in memory)",
    draftless=lambda arg: arg != "resident",
)
def _nospec(arg: str | None, env: PolicyEnv) -> Policy:
    # ``nospec:resident`` never speculates but keeps the draft loaded: it isolates
    # what the draft's memory alone costs (the difference to plain ``nospec``).
    if arg not in (None, "resident"):
        raise NightjarInputError(
            f"policy 'nospec' takes no argument or 'resident', got {arg!r}"
        )
    return FixedPolicy(0)


@register(
    "fixed",
    "standard speculative decoding with a fixed gamma (fixed:G)",
    default_specs=("fixed:1", "fixed:2", "fixed:3", "fixed:4"),
    draftless=lambda arg: arg is not None and arg.strip().isdigit() and int(arg) == 0,
)
def _fixed(arg: str | None, env: PolicyEnv) -> Policy:
    if arg is None:
        raise NightjarInputError("policy 'fixed' needs a gamma, e.g. fixed:3")
    return FixedPolicy(_parse_gamma(arg, f"fixed:{arg}", env.gamma_max))


VLLM_DEFAULT_SCHEDULE = "1-16:3,17-64:1,65-:0"


@register(
    "schedule",
    "static batch-size -> gamma table (schedule:1-16:3,17-64:1,65-:0)",
    default_specs=(f"schedule:{VLLM_DEFAULT_SCHEDULE}",),
)
def _schedule(arg: str | None, env: PolicyEnv) -> Policy:
    return SchedulePolicy(parse_schedule(VLLM_DEFAULT_SCHEDULE if arg is None else arg,
                                         env.gamma_max))
