"""Step-time priors for policies inside vLLM: a profile, or a table measured on this engine.

Policies that plan with latency (``nightjar+``, ``dsd``) take a
:class:`nightjar.core.types.LatencyModel` through ``PolicyEnv.latency``. The live engine
can give them two kinds:

- a nightjar profile (``nightjar profile`` output or a bundled one), wrapped in
  :class:`Clamped` so that a batch or context outside its table is looked up at the
  nearest edge instead of raising mid-run;
- a :class:`StepTable`: measured step time per (batch size, gamma) from a previous
  live run's steps (``steps.csv`` or a step log), linear in the batch size between
  measured points and flat beyond them, and linear in the context length with one
  slope per batch size (attention grows with context; without it a policy that
  corrects the prior from the arm it runs would see that arm grow dearer while
  the arms it does not run stay put).

A step-table file is JSON ``{"kind": "nightjar-step-table", "batch_sizes": [...],
"gammas": [0..G], "step_s": [[per batch size] per gamma] (at the reference
context), "context_ref": [per batch size], "context_slope_s": [per batch size],
"acceptance": a}``. Imports neither vllm
nor torch.
"""

from __future__ import annotations

import bisect
import itertools
import os
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from nightjar.core.acceptance import alpha_from_ratio
from nightjar.core.records import StepRecord
from nightjar.core.types import LatencyModel
from nightjar.errors import NightjarInputError
from nightjar.profile.prefill import reload_cost_s
from nightjar.profile.profile import Profile, load_profile

KIND = "nightjar-step-table"


@dataclass(frozen=True, slots=True)
class StepTable:
    """Measured step seconds; invariants: batch sizes strictly increase, every
    gamma row has one positive time per batch size, gammas are 0..G, slopes >= 0."""

    batch_sizes: tuple[int, ...]
    step_s: tuple[tuple[float, ...], ...]  # [gamma][batch index], at context_ref
    # Per batch size: the median context the times were measured at, and seconds
    # per token of mean context away from it (empty = context ignored).
    context_ref: tuple[float, ...] = ()
    context_slope_s: tuple[float, ...] = ()
    # Per-position acceptance rate measured in the same run (a policy prior).
    acceptance: float | None = None

    def __post_init__(self) -> None:
        bs = self.batch_sizes
        if not bs or any(b < 1 for b in bs) or any(a >= b for a, b in itertools.pairwise(bs)):
            raise NightjarInputError(f"step table: batch sizes must increase from 1, got {bs}")
        if not self.step_s or any(
            len(row) != len(bs) or not all(t > 0 for t in row) for row in self.step_s
        ):
            raise NightjarInputError("step table: need one positive time per batch size and gamma")
        if (self.context_slope_s or self.context_ref) and (
            len(self.context_slope_s) != len(bs)
            or len(self.context_ref) != len(bs)
            or min(self.context_slope_s) < 0
        ):
            raise NightjarInputError(
                "step table: need one context reference and slope >= 0 per batch size"
            )

    @property
    def gamma_max(self) -> int:
        return len(self.step_s) - 1

    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float:
        row = self.step_s[min(max(gamma, 0), self.gamma_max)]
        bs = self.batch_sizes
        if batch_size <= bs[0]:
            return self._at(row, 0, context_len)
        if batch_size >= bs[-1]:
            return self._at(row, len(bs) - 1, context_len)
        i = bisect.bisect_right(bs, batch_size) - 1
        w = (batch_size - bs[i]) / (bs[i + 1] - bs[i])
        lo, hi = self._at(row, i, context_len), self._at(row, i + 1, context_len)
        return lo + w * (hi - lo)

    def _at(self, row: tuple[float, ...], i: int, context_len: float) -> float:
        if not self.context_slope_s:
            return row[i]
        shift = self.context_slope_s[i] * (context_len - self.context_ref[i])
        # Far below the measured contexts the line says little: floor it.
        return max(row[i] + shift, 0.5 * row[i])

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "batch_sizes": list(self.batch_sizes),
            "gammas": list(range(self.gamma_max + 1)),
            "step_s": [list(r) for r in self.step_s],
            "context_ref": list(self.context_ref),
            "context_slope_s": list(self.context_slope_s),
            "acceptance": self.acceptance,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str) -> StepTable:
        try:
            return cls(
                tuple(int(b) for b in data["batch_sizes"]),
                tuple(tuple(float(t) for t in row) for row in data["step_s"]),
                tuple(float(x) for x in data.get("context_ref") or ()),
                tuple(float(x) for x in data.get("context_slope_s") or ()),
                None if data.get("acceptance") is None else float(data["acceptance"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise NightjarInputError(f"step table {where}: malformed ({exc})") from None

    @classmethod
    def from_steps(cls, steps: Iterable[StepRecord], min_steps: int = 3) -> StepTable:
        """Median time of the pure decode steps per (batch size, gamma).

        Keeps the batch sizes where every gamma that ran was seen ``min_steps``
        times (so rows share one axis); raises if none qualifies.
        """
        times: dict[tuple[int, int], list[tuple[float, float]]] = {}
        drafted = accepted = slots = 0
        for s in steps:
            if s.gamma > 0 and s.drafted > 0:
                drafted, accepted, slots = (
                    drafted + s.drafted,
                    accepted + s.accepted,
                    slots + s.batch_size,
                )
            if s.batch_size > 0 and s.prefill_tokens == 0 and s.draft_state == "resident":
                ctx = s.mean_context_len if s.mean_context_len == s.mean_context_len else 0.0
                times.setdefault((s.batch_size, s.gamma), []).append((ctx, s.step_time_s))
        gammas = sorted({g for _, g in times})
        if len(gammas) < 2 or gammas != list(range(len(gammas))):
            raise NightjarInputError(
                f"step table: need steps at every gamma 0..G (G >= 1), got {gammas}"
            )
        sizes = sorted(
            b
            for b in {b for b, _ in times}
            if all(len(times.get((b, g), [])) >= min_steps for g in gammas)
        )
        if not sizes:
            raise NightjarInputError("step table: no batch size has enough steps at every gamma")
        slopes = tuple(_context_slope([times[(b, g)] for g in gammas]) for b in sizes)
        refs = tuple(statistics.median(c for g in gammas for c, _ in times[(b, g)]) for b in sizes)
        rows = tuple(
            tuple(
                statistics.median(t - k * (c - ref) for c, t in times[(b, g)])
                for b, k, ref in zip(sizes, slopes, refs, strict=True)
            )
            for g in gammas
        )
        alpha = None
        if drafted:
            # accepted/drafted understates the per-position rate (a rejection ends
            # the run of drafts); invert the geometric law at the mean gamma.
            ratio = np.array([accepted / drafted])
            alpha = float(alpha_from_ratio(ratio, drafted / max(slots, 1))[0])
        return cls(tuple(sizes), rows, refs, slopes, alpha)


def _context_slope(groups: list[list[tuple[float, float]]]) -> float:
    """Least-squares slope of time on context, pooled within groups (one intercept
    per gamma), floored at 0: more context never makes a step faster."""
    num = den = 0.0
    for pts in groups:
        mc = statistics.fmean(c for c, _ in pts)
        mt = statistics.fmean(t for _, t in pts)
        num += sum((c - mc) * (t - mt) for c, t in pts)
        den += sum((c - mc) ** 2 for c, _ in pts)
    return max(num / den, 0.0) if den > 0 else 0.0


@dataclass(slots=True)
class Clamped:
    """A profile looked up at the nearest edge of its table, or past its largest batch
    along its last segment (never raises mid-run), through :meth:`Profile.clamp` as
    every engine prices; ``off_grid_lookups`` counts the lookups priced off the
    measured grid (:meth:`Profile.off_grid`), ``off_grid_steps`` the scheduler steps with at
    least one (:meth:`end_step`). Both go to the run's summary (:meth:`summary`), as
    the simulator's ``context_clamped_steps`` does."""

    profile: Profile
    off_grid_lookups: int = 0
    off_grid_steps: int = 0
    _seen: int = 0  # off_grid_lookups when the last step ended

    def end_step(self) -> None:
        """One scheduler step's decision is made: count it if it looked off the grid."""
        if self.off_grid_lookups > self._seen:
            self.off_grid_steps += 1
        self._seen = self.off_grid_lookups

    def summary(self) -> dict[str, float]:
        return {
            "off_grid_lookups": float(self.off_grid_lookups),
            "off_grid_steps": float(self.off_grid_steps),
        }

    def _clamp(self, batch_size: int, context_len: float) -> tuple[int, float]:
        if self.profile.off_grid(batch_size, context_len):
            self.off_grid_lookups += 1
        return self.profile.clamp(batch_size, context_len)

    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float:
        p = self.profile
        b, c = self._clamp(batch_size, context_len)
        return p.step_time_s(b, min(max(gamma, 0), p.gamma_max), c)

    def draft_forward_s(self, batch_size: int, context_len: float) -> float:
        return self.profile.draft_forward_s(*self._clamp(batch_size, context_len))


def load_latency(name_or_path: str) -> tuple[LatencyModel, float | None]:
    """A step-table JSON file, or a nightjar profile (bundled name or path), with the
    acceptance rate it measured (None for profiles: theirs are per workload)."""
    from nightjar.reading import as_path, read_json

    path = as_path(name_or_path, "--profile")
    if os.path.lexists(path):
        data = read_json(path, f"profile {name_or_path}")
        if isinstance(data, dict) and data.get("kind") == KIND:
            table = StepTable.from_json(data, name_or_path)
            return table, table.acceptance
    return Clamped(load_profile(name_or_path)), None


def priced_gamma_max(name_or_path: str) -> int | None:
    """The largest gamma a prior's table prices (None: no range, any gamma is priced).
    Beyond it a lookup returns the top gamma's time, so that longer speculation would
    look free to a policy planning with it: callers hold ``gamma_max`` to this."""
    model, _ = load_latency(name_or_path)
    if isinstance(model, Clamped):
        return model.profile.gamma_max
    return model.gamma_max if isinstance(model, StepTable) else None


def reload_cost_estimate(model: LatencyModel) -> float | None:
    """What a reload costs by a nightjar profile (as the simulator prices it); a step
    table has no prefill times, so None (the caller then needs an explicit cost)."""
    return reload_cost_s(model.profile) if isinstance(model, Clamped) else None
