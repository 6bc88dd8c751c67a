"""How fast a live run replays its trace: ``--rate-scale`` (one meaning on every
command: it multiplies the request rate), or the deprecated ``--time-scale``."""

from __future__ import annotations

import math
import warnings

from nightjar.errors import NightjarInputError


def rate_scale_of(rate_scale: float | None, time_scale: float | None) -> float:
    """``rate_scale`` (1 when None), or the deprecated ``time_scale`` T as its inverse
    1/T (with a FutureWarning); never both."""
    if time_scale is not None:
        if rate_scale is not None:
            raise NightjarInputError("give --rate-scale or --time-scale (deprecated), not both")
        if not (math.isfinite(time_scale) and time_scale > 0):
            raise NightjarInputError(f"--time-scale must be > 0, got {time_scale}")
        warnings.warn("--time-scale T is deprecated: use --rate-scale 1/T", FutureWarning,
                      stacklevel=1)
        return 1.0 / float(time_scale)
    scale = 1.0 if rate_scale is None else float(rate_scale)
    if not (math.isfinite(scale) and scale > 0):
        raise NightjarInputError(f"--rate-scale must be a finite number > 0, got {scale}")
    return scale
