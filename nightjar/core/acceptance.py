"""Acceptance rates recovered from what an engine measured (accepted / drafted tokens).

Vectorised over requests with numpy, unlike the per-step helpers of
:mod:`nightjar.core.estimators`: both the validator and the live profiler call it
once per run, never per step.
"""

from __future__ import annotations

import numpy as np


def alpha_from_ratio(ratio: np.ndarray, gamma: float) -> np.ndarray:
    """Per-position acceptance ``a`` whose geometric law gives ``accepted/drafted = ratio``.

    Under the truncated geometric law with ``g`` drafts a step accepts on average
    ``a (1 - a^g) / (1 - a)`` of them, so the measured ratio understates ``a``; this
    inverts that (monotone in ``a``) by bisection. NaN stays NaN.
    """
    target = np.clip(ratio, 0.0, 0.98)
    lo, hi = np.zeros_like(target), np.full_like(target, 0.99)
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        got = mid * (1.0 - mid**gamma) / ((1.0 - mid) * gamma)
        below = got < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return np.where(np.isnan(ratio), np.nan, 0.5 * (lo + hi))
