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
- ``batch-scale:S,L``: every step time multiplied by ``S`` at batch sizes up to
  :data:`SMALL_BATCH`, by ``L`` from :data:`LARGE_BATCH`, and by a factor
  log-linear in B between (a table right in shape at one load and wrong at
  another: ``batch-scale:1.3,0.8`` is 30% too slow at small batches, 20% too fast at
  large ones, which no single correction factor fixes);
- a profile name or path: another table (e.g. a roofline of another GPU).

``none`` gives the policies nothing from the profile: no step times and no
acceptance rate (:func:`gives_acceptance`).

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


# The batch sizes where ``batch-scale`` reaches its small-batch and large-batch factors.
SMALL_BATCH = 8
LARGE_BATCH = 64


@dataclass(frozen=True, slots=True)
class BatchScaledLatency:
    base: LatencyModel
    small: float
    large: float

    def factor(self, batch_size: int) -> float:
        if batch_size <= SMALL_BATCH:
            return self.small
        if batch_size >= LARGE_BATCH:
            return self.large
        w = math.log(batch_size / SMALL_BATCH) / math.log(LARGE_BATCH / SMALL_BATCH)
        return self.small + w * (self.large - self.small)

    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float:
        return self.factor(batch_size) * self.base.step_time_s(batch_size, gamma, context_len)


def gives_acceptance(spec: str) -> bool:
    """Whether the policies may also read the profile's acceptance rate under ``spec``."""
    return spec.strip() != "none"


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
    if kind == "batch-scale" and sep:
        parts = arg.split(",")
        if len(parts) != 2:
            raise NightjarInputError(
                f"--prior {spec!r}: batch-scale takes two factors, SMALL,LARGE (e.g. 1.3,0.8)"
            )
        return BatchScaledLatency(exact, _factor(spec, parts[0]), _factor(spec, parts[1]))
    from nightjar.profile.profile import bundled_profiles, load_profile

    if spec in bundled_profiles() or spec.endswith(".json"):
        return load_profile(spec)
    raise NightjarInputError(
        f"--prior {spec!r}: expected exact, none, scale:F, spec-scale:F, batch-scale:S,L"
        " or a profile"
    )
