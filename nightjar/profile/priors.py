"""What the policies believe about the hardware, separate from what the simulator runs.

``nightjar sim --prior SPEC`` hands planning policies (``nightjar+``, ``dsd``) a
latency model other than the profile that drives the simulation, to measure how
much of their gain rests on a perfect offline table:

- ``exact``: the simulated profile itself (the default; what every earlier result used);
- ``none``: no table at all (``nightjar+`` learns step times online; ``dsd`` refuses);
- ``scale:F``: every step time multiplied by ``F`` (a table off by a constant);
- ``spec-scale:F``: the cost of speculating, ``T(B, g) - T(B, 0)``, multiplied by
  ``F`` (a table that gets the draft and verify overhead wrong, which moves the
  best gamma; a constant factor does not);
- a profile name or path: another table (e.g. a roofline of another GPU).

The ``oracle`` always plans with the exact profile: it is the yardstick regret is
measured against, not a competitor (``PolicyEnv.truth``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nightjar.core.types import LatencyModel
from nightjar.errors import NightjarInputError


@dataclass(frozen=True, slots=True)
class ScaledLatency:
    base: LatencyModel
    factor: float

    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float:
        return self.factor * self.base.step_time_s(batch_size, gamma, context_len)


@dataclass(frozen=True, slots=True)
class SpecScaledLatency:
    base: LatencyModel
    factor: float

    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float:
        t0 = self.base.step_time_s(batch_size, 0, context_len)
        if gamma == 0:
            return t0
        return t0 + self.factor * (self.base.step_time_s(batch_size, gamma, context_len) - t0)


# A table off by more than a factor of a thousand is no table at all (and a factor near
# zero prices every step at nothing, which the planning policies divide by).
MIN_FACTOR = 1e-3
MAX_FACTOR = 1e3


def _factor(spec: str, text: str) -> float:
    try:
        f = float(text)
    except ValueError:
        raise NightjarInputError(f"--prior {spec!r}: {text!r} is not a number") from None
    if not (math.isfinite(f) and MIN_FACTOR <= f <= MAX_FACTOR):
        raise NightjarInputError(
            f"--prior {spec!r}: the factor must be in {MIN_FACTOR:g}..{MAX_FACTOR:g}, got {text}")
    return f


def parse_prior(spec: str, exact: LatencyModel) -> LatencyModel | None:
    """The latency model the policies plan with, for a ``--prior`` spec."""
    kind, sep, arg = spec.strip().partition(":")
    if kind == "exact" and not sep:
        return exact
    if kind == "none" and not sep:
        return None
    if kind == "scale" and sep:
        return ScaledLatency(exact, _factor(spec, arg))
    if kind == "spec-scale" and sep:
        return SpecScaledLatency(exact, _factor(spec, arg))
    from nightjar.profile.model import bundled_profiles, load_profile

    if spec in bundled_profiles() or spec.endswith(".json"):
        return load_profile(spec)
    raise NightjarInputError(
        f"--prior {spec!r}: expected exact, none, scale:F, spec-scale:F or a profile"
    )
