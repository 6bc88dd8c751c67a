"""A profile fitted from runs' own steps: ``nightjar profile --from-run RUN ... --base P``.

Every run folder holds its steps: batch, gamma, mean context, prompt tokens, drafts and
the step's measured time. Those are measurements taken exactly where a simulation of the
same engine must be right: requests arriving and finishing, mixed steps, the engine's
own scheduling. The fit keeps the base profile's shape and corrects its level cell by
cell where the runs have evidence:

- each step is priced by the base (:func:`nightjar.fidelity.compare.priced_steps`, the
  simulator's own price function) and its log ratio measured / priced is spread over
  the table cells its price interpolates between, with the same bilinear weights
  (:class:`nightjar.fidelity.ratio_grid.RatioGrid`);
- the cells' corrections are the least-squares fit of those log ratios through the
  same interpolation (so a price that errs more toward one end of a segment is fitted
  at both ends), shrunk toward 0 (the base) as if the base were :data:`PRIOR_STEPS`
  steps of its own (:meth:`RatioGrid.correction`); a cell's evidence (``n``, the
  weight that reached it) and the standard error of its log ratio go into the file
  (``measured.fit``), so ``profile --show`` says which cells the runs set and which
  still come from the base;
- tables, in order, each on what the earlier ones left: the decode table (pure decode
  steps, draft and verify columns scaled with the step), the mixed table (a mixed
  step's measured time less its fitted decode part and its draft's prefill: what the
  prompt added, against what the base says it adds; a base without a mixed table gets
  one on its own prefill curve first) and the prefill curve (prefill-only steps, the
  target's column). The wake after idle, the switch, the memory facts and acceptance
  stay the base's.

Steps that carry a rebuild (``switch_cost_s``) or wake an idle engine (where the base's
wake table adds more than :data:`WAKE_SHARE` of the price) are left out: they measure
something else; the small wake the table adds after the gap between two steps is taken
out of both the measured and the priced time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from nightjar.core.records import RunResult
from nightjar.fidelity.ratio_grid import PRIOR_STEPS, RatioGrid
from nightjar.profile.document import (
    MS_PER_S,
    DecodeRow,
    MixedRow,
    PrefillRow,
    refitted,
    to_ms,
)
from nightjar.profile.profile import Profile

# A cell reached by at least this much weight counts as fitted (in --show and the file).
FITTED_WEIGHT = 1.0
# A step whose priced wake-up is more than this share of its price measures the wake.
WAKE_SHARE = 0.05


@dataclass
class FitReport:
    """What the fit used and moved: steps per kind, and per table the cells fitted."""

    steps: dict[str, int]
    cells: dict[str, tuple[int, int]]  # table -> (fitted cells, all cells)
    median_change_pct: dict[str, float]


def synced(run: RunResult) -> bool:
    """Whether the run's draft kept its KV in step with the target (``--draft-kv sync``:
    its prefill is in every step, speculating or not)."""
    return run.provenance.get("draft_kv") == "sync"


def fit_profile(runs: Sequence[RunResult], base: Profile, *, name: str | None = None,
                command: str = "", sources: Sequence[str] = ()
                ) -> tuple[dict[str, Any], FitReport]:
    """The base profile's document with its tables fitted to the runs' steps (module
    docstring), and what the fit did."""
    from nightjar.fidelity.compare import priced_steps

    frames = [priced_steps(r, base, synced(r)).assign(sync=synced(r)) for r in runs]
    steps = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    if not steps.empty:
        # The wake the base adds after an idle gap stays the base's: taken out of both
        # sides, and a step it dominates (a real wake-up) left out.
        wake = steps["idle_s"].map(base.wake_s).to_numpy(float)
        steps = steps.assign(step_time_s=steps["step_time_s"] - wake,
                             priced_s=steps["priced_s"] - wake)
        quiet = (steps["switch_cost_s"] == 0) & (wake <= WAKE_SHARE * steps["priced_s"]) & (
            steps["priced_s"] > 0) & (steps["step_time_s"] > 0) & ~steps["clamped"].astype(bool)
        steps = steps[quiet]
    report = FitReport(steps={}, cells={}, median_change_pct={})
    fit_meta: dict[str, Any] = {}
    doc = base.to_json()  # a new dict: the fit's tables and metadata replace its own
    decode = _fit_decode(base, doc["decode"], _kind(steps, "decode"), report, fit_meta)
    fitted = Profile.from_json(refitted(doc, decode=decode), "fit (decode)")
    mixed = _fit_mixed(base, fitted, _kind(steps, "mixed"), report, fit_meta)
    prefill = _fit_prefill(base, doc["prefill"], _kind(steps, "prefill"), report, fit_meta)
    measured = dict(doc.get("measured") or {})
    measured["fit"] = {"base": base.name, "runs": list(sources), "prior_steps": PRIOR_STEPS,
                       "steps": report.steps,
                       "cells": {k: list(v) for k, v in report.cells.items()}, **fit_meta}
    meta: dict[str, Any] = {"name": name or f"{base.name}+runs", "source": "measured"}
    if command:
        meta["command"] = command
    meta["notes"] = (f"Fitted from {len(runs)} run(s)' own steps on {base.name} "
                     "(nightjar.fidelity.fit): cells the runs reached are corrected, the "
                     "rest are the base's; measured.fit lists each fitted cell.")
    meta["measured"] = measured
    data = refitted(doc, decode=decode, mixed=mixed, prefill=prefill, meta=meta)
    Profile.from_json(data, data["name"])  # the result must load
    return data, report


def _kind(steps: pd.DataFrame, kind: str) -> pd.DataFrame:
    return steps[steps["kind"] == kind] if not steps.empty else steps


def _cells(grid: RatioGrid, keys: list[tuple[Any, ...]]) -> list[list[float]]:
    """The fitted cells' rows for measured.fit: key..., weight, stderr of the log ratio."""
    se = grid.stderr()
    rows = []
    for (i, j), key in zip(np.ndindex(grid.w.shape), keys, strict=True):
        if grid.w[i, j] >= FITTED_WEIGHT:
            err = float(se[i, j])
            rows.append([*key, round(float(grid.w[i, j]), 2),
                         None if math.isnan(err) else round(err, 5)])
    return rows


def _note(report: FitReport, table: str, grids: list[RatioGrid], used: int) -> None:
    fitted = sum(int((g.w >= FITTED_WEIGHT).sum()) for g in grids)
    total = sum(g.w.size for g in grids)
    report.steps[table] = used
    report.cells[table] = (fitted, total)
    moved = [float(c) for g in grids for c in g.correction()[g.w >= FITTED_WEIGHT]]
    report.median_change_pct[table] = (100.0 * (float(np.median(moved)) - 1.0)
                                       if moved else 0.0)


def _fit_decode(base: Profile, table: list[list[Any]], s: pd.DataFrame, report: FitReport,
                meta: dict[str, Any]) -> list[DecodeRow]:
    bs, ctx = list(base.batch_sizes), list(base.context_lens)
    grids = {g: RatioGrid(bs, ctx) for g in range(base.gamma_max + 1)}
    for g, grid in grids.items():
        part = s[s["gamma"] == g] if not s.empty else s
        if part.empty:
            continue
        ratio = np.log(part["step_time_s"].to_numpy(float) / part["priced_s"].to_numpy(float))
        grid.add(part["batch_size"].to_numpy(float),
                 part["mean_context_len"].fillna(ctx[0]).to_numpy(float), ratio)
    factor = {g: grid.correction() for g, grid in grids.items()}
    index = {(b, c): (i, j) for i, b in enumerate(bs) for j, c in enumerate(ctx)}
    rows = []
    for row in table:
        b, g, c = row[0], row[1], row[2]
        f = float(factor[g][index[(b, float(c))]]) if g in factor else 1.0
        rows.append(DecodeRow.from_seconds(b, g, c, *(v * f / MS_PER_S for v in row[3:6])))
    keys = {g: [(b, g, c) for b in bs for c in ctx] for g in grids}
    meta["decode_cells"] = [r for g, grid in grids.items() for r in _cells(grid, keys[g])]
    _note(report, "decode", list(grids.values()), len(s))
    return rows


def _fit_mixed(base: Profile, fitted: Profile, s: pd.DataFrame, report: FitReport,
               meta: dict[str, Any]) -> list[MixedRow] | None:
    from nightjar.sim.price import StepPricer, decode_time_s

    # Without a base table, decode tokens from the smallest batch without drafts to the
    # largest with every draft (n (1 + gamma)).
    b_grid = list(base.mixed_batch_sizes) if base.has_mixed else sorted(
        set(base.batch_sizes) | {b * (1 + base.gamma_max) for b in base.batch_sizes})
    t_grid = list(base.mixed_tokens) if base.has_mixed else [
        int(t) for t in base.prefill_grid if t >= 16]
    if not t_grid or (s.empty and not base.has_mixed):
        _note(report, "mixed", [], 0)
        return None
    pricer = StepPricer(base)
    grid = RatioGrid(b_grid, t_grid)
    if not s.empty:
        n, g = s["batch_size"].to_numpy(int), s["gamma"].to_numpy(int)
        d, p = s["drafted"].to_numpy(int), s["prefill_tokens"].to_numpy(int)
        c = s["mean_context_len"].fillna(base.context_lens[0]).to_numpy(float)
        sync = s["sync"].to_numpy(bool)
        measured, x, y, r = s["step_time_s"].to_numpy(float), [], [], []
        for k in range(len(s)):
            gm = int(g[k])
            decode = (fitted.step_time_s(int(n[k]), gm, float(c[k])) if d[k] >= n[k] * gm
                      else decode_time_s(fitted, int(n[k]), gm, d[k] / n[k], float(c[k])))
            target, with_draft = pricer.prompt_s(int(n[k]), int(n[k] + d[k]), int(p[k]),
                                                 bool(gm > 0 or sync[k]))
            added = measured[k] - decode - (with_draft - target)
            if added > 0 and target > 0:
                x.append(float(n[k] + d[k]))
                y.append(float(min(p[k], t_grid[-1])))
                r.append(math.log(added / target))
        if r:
            grid.add(np.array(x), np.array(y), np.array(r))
    factor = grid.correction()
    rows = []
    for i, b in enumerate(b_grid):
        for j, t in enumerate(t_grid):
            prior = pricer.prompt_s(b, b, t, False)[0]
            rows.append(MixedRow(int(b), int(t), to_ms(prior * float(factor[i, j]))))
    meta["mixed_cells"] = _cells(grid, [(b, t) for b in b_grid for t in t_grid])
    _note(report, "mixed", [grid], len(s))
    return rows


def _fit_prefill(base: Profile, table: list[list[Any]], s: pd.DataFrame, report: FitReport,
                 meta: dict[str, Any]) -> list[PrefillRow]:
    tokens = [float(t) for t in base.prefill_grid]
    grid = RatioGrid(tokens, [0.0])
    if not s.empty:
        # The draft's share (its prefill and further passes) is the base's: the
        # target's column takes what is left.
        target = np.array([base.prefill_time_s(int(p)) for p in s["prefill_tokens"]])
        rest = s["priced_s"].to_numpy(float) - target
        added = s["step_time_s"].to_numpy(float) - rest
        ok = (added > 0) & (target > 0)
        grid.add(s["prefill_tokens"].to_numpy(float)[ok], np.zeros(int(ok.sum())),
                 np.log(added[ok] / target[ok]))
    factor = grid.correction()[:, 0]
    rows = [PrefillRow(row[0], to_ms(row[1] * float(f) / MS_PER_S), row[2])
            for row, f in zip(table, factor, strict=True)]
    meta["prefill_cells"] = _cells(grid, [(int(t),) for t in tokens])
    _note(report, "prefill", [grid], len(s))
    return rows

