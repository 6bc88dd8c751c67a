"""A live run's two speculation lengths: the policy's ``gamma_max`` and the engine's
``num_speculative_tokens`` (the draft buffers vLLM sizes at start-up)."""

from __future__ import annotations

from nightjar.core.defaults import DEFAULT_GAMMA_MAX
from nightjar.errors import NightjarInputError


def speculation_lengths(gamma_max: int | None, spec_tokens: int | None,
                        default: int = DEFAULT_GAMMA_MAX) -> tuple[int, int]:
    """(gamma_max, num_speculative_tokens), None where not given: each defaults to the
    other, both to ``default``; the policy may never ask for more than the engine drafts."""
    if gamma_max is None:
        gamma_max = spec_tokens if spec_tokens is not None else default
    k = gamma_max if spec_tokens is None else spec_tokens
    if gamma_max < 0 or k < 0:
        raise NightjarInputError("--gamma-max and num_speculative_tokens must be >= 0")
    if gamma_max > k:
        raise NightjarInputError(
            f"--gamma-max {gamma_max} exceeds the engine's num_speculative_tokens "
            f"({k}); vLLM cannot draft more tokens than it was started with"
        )
    return gamma_max, k
