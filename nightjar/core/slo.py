"""The latency limits (SLO) that goodput counts against; policies may optimise for them."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Slo:
    """Latency limits a request must meet to count towards goodput.

    Defaults: 2 s to first token (an interactive chat budget) and 100 ms per output
    token (about 10 tok/s, faster than people read), in the range serving papers use.
    """

    ttft_s: float = 2.0
    tpot_s: float = 0.1

    def __post_init__(self) -> None:
        for name, value in (("TTFT", self.ttft_s), ("TPOT", self.tpot_s)):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"the {name} SLO must be a finite number of seconds > 0")

    def describe(self) -> str:
        """``SLO: TTFT <= 2 s, TPOT <= 100 ms`` (how tables and reports print it)."""
        return f"SLO: TTFT <= {self.ttft_s:g} s, TPOT <= {self.tpot_s * 1e3:g} ms"
