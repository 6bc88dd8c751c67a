"""Named workloads: request length and draft acceptance distributions.

These are fitted *shapes* standing in for public datasets (ShareGPT, Alpaca,
Spec-Bench), not the datasets themselves: a clipped lognormal per length whose
clipped mean hits the documented target, and a Beta distribution for each
request's acceptance rate. See docs/traces.md for the numbers and why.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from nightjar.errors import NightjarInputError

# Acceptance rates are clipped here: a rate of 1 makes the expected tokens per
# step formula (1 - a^(g+1)) / (1 - a) divide by zero downstream.
MAX_ACCEPTANCE = 0.99


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _clipped_lognormal_mean(mu: float, sigma: float, lo: float, hi: float) -> float:
    """E[clip(X, lo, hi)] for X = exp(N(mu, sigma^2)), in closed form."""
    a, b = math.log(lo), math.log(hi)
    below = lo * _phi((a - mu) / sigma)
    above = hi * (1.0 - _phi((b - mu) / sigma))
    inside = math.exp(mu + sigma * sigma / 2.0) * (
        _phi((b - mu - sigma * sigma) / sigma) - _phi((a - mu - sigma * sigma) / sigma)
    )
    return below + inside + above


# The most tokens one request may hold: far beyond any model, yet small enough that
# sums over requests never overflow int64 (a larger count is a typo).
MAX_TOKENS = 2**40
# A wider lognormal is a typo: sigma 10 already spans e^20 between p2 and p98.
MAX_SIGMA = 10.0


@dataclass(frozen=True)
class LengthDist:
    """A token-length distribution: ``lognormal`` (clipped), ``uniform`` or ``constant``.

    For ``lognormal``, ``mean`` is the mean *after* clipping to ``[lo, hi]``: the
    underlying location is solved for at construction, so the documented means are
    what a sample actually averages (up to integer rounding).
    Invariant: ``1 <= lo <= hi``; samples are int64 in ``[lo, hi]``.
    """

    kind: str
    mean: float
    sigma: float = 0.0
    lo: int = 1
    hi: int = 2048

    def __post_init__(self) -> None:
        if self.kind not in ("lognormal", "uniform", "constant"):
            raise ValueError(f"unknown length distribution {self.kind!r}")
        if not 1 <= self.lo <= self.hi:
            raise ValueError(f"need 1 <= lo <= hi, got lo={self.lo} hi={self.hi}")
        if not self.lo <= self.mean <= self.hi:
            raise ValueError(f"mean {self.mean} outside [{self.lo}, {self.hi}]")
        if self.kind == "lognormal" and self.sigma <= 0:
            raise ValueError("lognormal needs sigma > 0")

    @cached_property
    def _mu(self) -> float:
        # Bisection on the location: the clipped mean is increasing in mu.
        lo_mu, hi_mu = math.log(self.lo) - 10 * self.sigma, math.log(self.hi) + 10 * self.sigma
        for _ in range(100):
            mid = 0.5 * (lo_mu + hi_mu)
            if _clipped_lognormal_mean(mid, self.sigma, self.lo, self.hi) < self.mean:
                lo_mu = mid
            else:
                hi_mu = mid
        return 0.5 * (lo_mu + hi_mu)

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "constant":
            return np.full(n, round(self.mean), dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(self.lo, self.hi + 1, size=n, dtype=np.int64)
        x = rng.lognormal(self._mu, self.sigma, size=n)
        return np.clip(np.rint(x), self.lo, self.hi).astype(np.int64)

    @classmethod
    def from_json(cls, obj: Any, where: str) -> LengthDist:
        """Parse ``{"dist": "lognormal", "mean": .., "sigma": .., "min": .., "max": ..}``,
        ``{"dist": "uniform", "min": .., "max": ..}`` or ``{"dist": "constant", "value": ..}``.
        """
        if not isinstance(obj, Mapping):
            raise NightjarInputError(f"{where} must be an object with a 'dist' field")
        allowed = {
            "lognormal": {"dist", "mean", "sigma", "min", "max"},
            "uniform": {"dist", "min", "max"},
            "constant": {"dist", "value"},
        }
        kind = obj.get("dist")
        if kind not in allowed:
            raise NightjarInputError(
                f"{where}.dist must be one of lognormal, uniform, constant (got {kind!r})"
            )
        extra = sorted(set(obj) - allowed[kind])
        if extra:
            raise NightjarInputError(f"{where}: unknown field {extra[0]!r} for dist {kind!r}")

        def num(key: str, default: float | None = None) -> float:
            v = obj.get(key, default)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                got = str(v)[:40]
                raise NightjarInputError(f"{where}.{key} must be a finite number (got {got})")
            return float(v)

        try:
            if kind == "constant":
                v = num("value")
                if not 1 <= v <= MAX_TOKENS:
                    raise NightjarInputError(f"{where}.value must be in 1..{MAX_TOKENS}")
                return cls("constant", v, lo=max(1, round(v)), hi=max(1, round(v)))
            lo, hi = num("min", 1), num("max", 2048)
            if lo != int(lo) or hi != int(hi):
                raise NightjarInputError(f"{where}: min and max must be integers")
            if hi > MAX_TOKENS:
                raise NightjarInputError(f"{where}.max must be <= {MAX_TOKENS} (got {hi:g})")
            if kind == "lognormal" and not 0 < num("sigma") <= MAX_SIGMA:
                raise NightjarInputError(f"{where}.sigma must be in (0, {MAX_SIGMA:g}]")
            if kind == "uniform":
                return cls("uniform", (lo + hi) / 2, lo=int(lo), hi=int(hi))
            return cls("lognormal", num("mean"), sigma=num("sigma"), lo=int(lo), hi=int(hi))
        except NightjarInputError:
            raise
        except ValueError as exc:
            raise NightjarInputError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class Workload:
    """A named request population: prompt/output lengths and draft acceptance."""

    name: str
    description: str
    prompt: LengthDist
    output: LengthDist
    acceptance_mean: float
    acceptance_concentration: float  # Beta a + b: higher means less spread

    def sample_lengths(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        return self.prompt.sample(rng, n), self.output.sample(rng, n)

    def sample_acceptance(
        self,
        rng: np.random.Generator,
        n: int,
        mean: float | None = None,
        concentration: float | None = None,
    ) -> np.ndarray:
        """Per-request acceptance ~ Beta(m c, (1 - m) c), clipped to MAX_ACCEPTANCE."""
        m = self.acceptance_mean if mean is None else mean
        c = self.acceptance_concentration if concentration is None else concentration
        if not 0.0 < m < 1.0 or c <= 0.0:
            raise NightjarInputError(
                f"acceptance mean must be in (0, 1) and concentration > 0 (got {m}, {c})"
            )
        return np.minimum(rng.beta(m * c, (1.0 - m) * c, size=n), MAX_ACCEPTANCE)


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload(
            "sharegpt",
            "chat (ShareGPT-like): short-to-long prompts, long answers, heavy tail",
            prompt=LengthDist("lognormal", 161.0, sigma=1.1, lo=1, hi=2048),
            output=LengthDist("lognormal", 338.0, sigma=0.9, lo=1, hi=2048),
            acceptance_mean=0.60,
            acceptance_concentration=20.0,
        ),
        Workload(
            "alpaca",
            "instructions (Alpaca-like): very short prompts and short answers",
            prompt=LengthDist("lognormal", 19.0, sigma=0.5, lo=1, hi=512),
            output=LengthDist("lognormal", 58.0, sigma=0.8, lo=1, hi=1024),
            acceptance_mean=0.65,
            acceptance_concentration=20.0,
        ),
        Workload(
            "specbench",
            "mixed tasks (Spec-Bench-like): longer prompts, wide acceptance spread",
            prompt=LengthDist("lognormal", 350.0, sigma=1.0, lo=1, hi=4096),
            output=LengthDist("lognormal", 250.0, sigma=0.7, lo=1, hi=2048),
            acceptance_mean=0.55,
            acceptance_concentration=6.0,
        ),
        # LongBench (Bai et al., ACL 2024, arXiv 2308.14508) reports an average of
        # 6,711 words for its English tasks (most tasks 5k-15k; e.g. Qasper 3,619,
        # GovReport 8,169, QMSum 10,546, NarrativeQA 18,405): about 8,700 tokens at
        # ~1.3 tokens per English word. Its answers are short (QA) to a few hundred
        # tokens (summaries). Acceptance is not published for such a pair: the chat
        # figure is kept rather than guessed. See docs/traces.md.
        Workload(
            "longctx",
            "long context (LongBench-like RAG/QA/summaries): 1k-32k-token prompts, short answers",
            prompt=LengthDist("lognormal", 8700.0, sigma=0.8, lo=1024, hi=32000),
            output=LengthDist("lognormal", 200.0, sigma=0.9, lo=8, hi=1024),
            acceptance_mean=0.60,
            acceptance_concentration=20.0,
        ),
    )
}


def get_workload(name: str) -> Workload:
    try:
        return WORKLOADS[name]
    except KeyError:
        raise NightjarInputError(
            f"unknown workload {name!r} (known: {', '.join(sorted(WORKLOADS))})"
        ) from None
