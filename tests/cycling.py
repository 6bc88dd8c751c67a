"""A trace of bursts with quiet gaps between them, shared by the offload tests and the
golden digests: the draft leaves and returns again and again, under load."""

from __future__ import annotations

import numpy as np

from nightjar.trace.trace import Trace


def cycling_trace() -> Trace:
    """Bursts separated by quiet gaps, so the draft leaves and returns repeatedly."""
    rng = np.random.default_rng(9)
    parts, t0 = [], 0.0
    for _ in range(4):
        parts.append(t0 + np.sort(rng.uniform(0, 4, 300)))  # 75 req/s for 4 s
        parts.append(t0 + 4 + np.sort(rng.uniform(0, 30, 15)))  # then a quiet 30 s
        t0 += 34
    arrivals = np.concatenate(parts)
    n = arrivals.size
    return Trace(
        name="cycles", seed=9, arrival_s=arrivals,
        prompt_tokens=rng.integers(100, 600, n), output_tokens=rng.integers(20, 200, n),
        workload=np.array(["sharegpt"] * n, dtype=object), acceptance=np.full(n, np.nan),
        prompts=None,
    )
