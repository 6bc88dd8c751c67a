"""The live benchmark's defaults and the bounds on its settings, checked before any
engine starts."""

from __future__ import annotations

import math

from nightjar.core.defaults import DEFAULT_GAMMA_MAX
from nightjar.errors import NightjarInputError
from nightjar.live.kv_room import check_kv_cache_gb

# The five policies the agreement goal is judged on.
BENCH_POLICIES = ("nospec", "fixed:3", "nightjar", "nightjar-code", "nightjar+")
BENCH_REPEATS = 3
MAX_FOREIGN_PCT = 10.0
BENCH_RETRIES = 2
BENCH_KV_GB = 1.0  # `nightjar profile`'s pool: the simulator then prices the same capacity
BENCH_MAX_MODEL_LEN = 2048


def check_bench_numbers(time_scale: float, kv_cache_gb: float, retries: int,
                        max_foreign_pct: float, gamma_max: int | None) -> None:
    if not (math.isfinite(time_scale) and time_scale > 0):
        raise NightjarInputError(f"--time-scale must be > 0, got {time_scale}")
    check_kv_cache_gb(kv_cache_gb)
    if retries < 0:
        raise NightjarInputError(f"--retries must be >= 0, got {retries}")
    if not 0 <= max_foreign_pct <= 100:
        raise NightjarInputError(f"--max-foreign must be a percentage, got {max_foreign_pct}")
    if gamma_max is not None and gamma_max < 1:
        raise NightjarInputError("--gamma-max must be >= 1 for a benchmark of speculation")


def bench_gamma_max(given: int | None, profile: str | None) -> int:
    """The runs' longest speculation, held to what the profile prices: the runs are
    validated against it, and a gamma it cannot price would fail there, an hour of
    measurement later."""
    from nightjar.live.step_prior import within_prior

    gamma_max = within_prior(given, DEFAULT_GAMMA_MAX if given is None else given, profile)
    if gamma_max < 1:
        raise NightjarInputError(
            "--profile prices gamma 0 only: a benchmark of speculation needs one measured "
            "with --gammas 0..G")
    return gamma_max
