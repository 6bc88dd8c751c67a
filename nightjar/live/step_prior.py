"""The step-time prior a live run plans with (``--profile``), and the longest
speculation it prices."""

from __future__ import annotations

from pathlib import Path

from nightjar.core.defaults import gamma_max_within
from nightjar.errors import NightjarInputError


def checked_prior(name: str | None) -> str | None:
    """Load the prior once here, so that a bad one fails before vLLM starts; a file as
    an absolute path (the engine core may run elsewhere), a bundled name as given."""
    if name is None:
        return None
    from nightjar.live.profiling.latency import load_latency

    load_latency(name)
    path = Path(name)
    return str(path.resolve()) if path.is_file() else name


def within_prior(given: int | None, gamma_max: int, profile: str | None) -> int:
    """``gamma_max`` held to the gammas the ``--profile`` prices: past its table a
    lookup returns the top gamma's time, so longer speculation would look free to a
    policy planning with it. A default is lowered; a ``--gamma-max`` given is refused."""
    from nightjar.live.profiling.latency import priced_gamma_max

    top = None if profile is None else priced_gamma_max(profile)
    if given is not None and top is not None and gamma_max > top:
        raise NightjarInputError(
            f"--gamma-max {given} exceeds the --profile's table (gamma <= {top}): "
            f"pass --gamma-max {top}, or profile with --gammas 0..{given}")
    return gamma_max_within(gamma_max, given is not None, top)
