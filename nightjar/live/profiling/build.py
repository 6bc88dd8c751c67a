"""Turns what the profiler's engines recorded into a profile JSON (docs/profiles.md).

Pure Python (no vllm, no torch). Inputs per engine: the scheduler's steps (start on
``time.monotonic()``, duration, batch, prefill tokens, verified gamma and the K it
proposed), the worker probe's timed calls (``nightjar.live.profiling.probe``), and the
windows the profiler ran its requests in. A timed call belongs to the step whose
interval holds its start.

How each table is measured (the engines are described in nightjar.live.profiling.profiler):

- ``decode[B, 0, C]``: the no-draft engine's pure decode steps with B running;
  ``verify_ms`` = target forward + logits, ``draft_ms`` = 0;
- ``decode[B, G, C]``: the draft engine's pure decode steps with B running that
  verified G drafts and proposed G (a ``fixed:G`` step inside the gamma cycle);
  ``draft_ms`` = the drafter's ``propose`` (all G passes), ``verify_ms`` = target
  forward + logits; ``step_ms - draft_ms - verify_ms`` is the step's overhead
  (scheduling, input preparation, sampling, rejection, output processing);
- ``draft_forward[B, C]``: ``propose`` in the draft engine's decode steps that
  verified and proposed K = 0, where vLLM runs one draft pass over the new tokens
  to keep the draft's KV current;
- ``prefill[n]``: ``target_ms`` = the no-draft engine's prefill of n prompt tokens
  (whole steps); ``draft_ms`` = ``propose`` in the draft engine's prefill of the
  same prompts at ``fixed:0`` (one draft pass over the prompt tokens);
- ``mixed[B, n]``: what n prompt tokens add to a decode step of B requests, in the
  no-draft engine: the median step that ran the B decodes and the n prompt tokens
  together, minus the median pure decode step of the same B in the same window (the
  decodes run before and after the prompts arrive). This is how vLLM V1 serves a
  prompt that arrives while others decode (chunked prefill mixes them);
- ``wake[idle]``: what waking an idle engine adds to its next step, in the no-draft
  engine: the median prefill window of a few prompt tokens submitted after a pause
  of ``idle`` seconds, minus the median of the same window submitted at once after
  another (each paused window is followed by one), never below 0.

Every cell is the median over all matching steps of all repeats. Context C is the
nominal one: prompts of ``C - output/2`` tokens decoding ``output`` tokens, so the
decode steps' mean context is C.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nightjar.core.records import StepRecord
from nightjar.errors import NightjarInputError
from nightjar.profile.document import (
    MS_DIGITS,
    MS_PER_S,
    DecodeRow,
    DraftForwardRow,
    PrefillRow,
    to_ms,
)
from nightjar.profile.profile import MemoryFacts

Record = tuple[str, float, float]
MAX_CONCENTRATION = 1000.0


@dataclass(frozen=True, slots=True)
class Window:
    """One batch of requests the profiler submitted: ``kind`` decode, prefill, mixed,
    accept or wake (submitted ``pause_s`` after the engine's previous step). A decode
    window may be a ladder (:mod:`nightjar.live.profiling.ladder`): its batch shrinks
    through ``rungs``, each a batch size it measures."""

    kind: str
    batch_size: int
    context: int  # decode: nominal context; prefill: prompt tokens
    start: float
    end: float
    request_ids: tuple[str, ...] = ()
    pause_s: float = 0.0
    rungs: tuple[int, ...] = ()  # a ladder's batch sizes, largest (batch_size) first

    @property
    def sizes(self) -> tuple[int, ...]:
        """The batch sizes this window measures."""
        return self.rungs or (self.batch_size,)


@dataclass
class EngineRun:
    """What one engine recorded (``drafted``: the engine with the draft)."""

    drafted: bool
    steps: list[StepRecord]  # time_s = monotonic start
    records: list[Record]
    windows: list[Window]
    facts: dict[str, Any]
    pool_blocks: int
    requests: dict[str, dict[str, int]] = field(default_factory=dict)
    # The K each step proposed (the policy's choice, parallel to ``steps``; the step's
    # own ``gamma`` is the K it verified). Empty: every step proposed its own gamma.
    chosen: list[int] = field(default_factory=list)


@dataclass
class _Timed:
    step: StepRecord
    window: Window | None
    draft_s: float
    verify_s: float
    proposed: int  # the K the step proposed


def attribute(run: EngineRun) -> list[_Timed]:
    """Each step with its window and the probe time that fell inside it."""
    recs = sorted(run.records, key=lambda r: r[1])
    starts = [r[1] for r in recs]
    wins = sorted(run.windows, key=lambda w: w.start)
    win_starts = [w.start for w in wins]
    out = []
    for k, s in enumerate(run.steps):
        lo = bisect_left(starts, s.time_s)
        hi = bisect_right(starts, s.time_s + s.step_time_s)
        draft = sum(d for k, _, d in recs[lo:hi] if k == "draft")
        verify = sum(d for k, _, d in recs[lo:hi] if k != "draft")
        i = bisect_right(win_starts, s.time_s) - 1
        win = wins[i] if i >= 0 and s.time_s <= wins[i].end else None
        proposed = run.chosen[k] if k < len(run.chosen) else s.gamma
        out.append(_Timed(s, win, draft, verify, proposed))
    return out


def _median_ms(xs: list[float]) -> float:
    return to_ms(statistics.median(xs))


def decode_cells(
    run: EngineRun, gamma: int
) -> dict[tuple[int, int], tuple[float, float, float, int]]:
    """(B, C) -> (step_ms, draft_ms, verify_ms, steps) over the pure decode steps with B
    running that verified ``gamma`` drafts and proposed ``gamma`` (a fixed-gamma step),
    B one of the window's batch sizes (a ladder's batch passes through sizes between
    its rungs as a group's requests finish: those steps are no cell's)."""
    samples: dict[tuple[int, int], list[_Timed]] = defaultdict(list)
    for t in attribute(run):
        w, s = t.window, t.step
        if w is None or w.kind != "decode" or s.prefill_tokens or s.gamma != gamma:
            continue
        if t.proposed == gamma and s.batch_size in w.sizes:
            samples[(s.batch_size, w.context)].append(t)
    return {
        key: (
            _median_ms([t.step.step_time_s for t in ts]),
            _median_ms([t.draft_s for t in ts]),
            _median_ms([t.verify_s for t in ts]),
            len(ts),
        )
        for key, ts in samples.items()
    }


def prefill_cells(run: EngineRun) -> dict[int, tuple[float, float, int]]:
    """n -> (step_ms, draft_ms, windows) over the prefill windows of n prompt tokens.

    A window's time is the sum over its steps (one step when the engine's token budget
    holds n; the draft engine may chunk differently, so windows, not steps, are matched).
    """
    samples: dict[int, list[list[float]]] = defaultdict(list)
    for w, tot in _window_totals(run, "prefill").items():
        samples[w.context].append(tot)
    return {
        n: (_median_ms([x[0] for x in xs]), _median_ms([x[1] for x in xs]), len(xs))
        for n, xs in samples.items()
    }


def _window_totals(run: EngineRun, kind: str) -> dict[Window, list[float]]:
    """Each window of ``kind`` -> [step seconds, draft seconds] summed over its steps.
    Every step of a prefill or wake window is its prefill (max_tokens = 1); a 1-token
    prompt's step counts as a decode in the step log (1 token scheduled)."""
    totals: dict[Window, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for t in attribute(run):
        if t.window is not None and t.window.kind == kind:
            totals[t.window][0] += t.step.step_time_s
            totals[t.window][1] += t.draft_s
    return totals


def wake_rows(run: EngineRun) -> list[list[float]]:
    """The ``wake`` table, [idle_s, added_ms] per pause, from the wake windows (empty
    when none ran): the median window after the pause less the median back-to-back one."""
    samples: dict[float, list[float]] = defaultdict(list)
    for w, tot in _window_totals(run, "wake").items():
        samples[w.pause_s].append(tot[0])
    if 0.0 not in samples:
        return []
    ref = statistics.median(samples.pop(0.0))
    return [[pause, round(max(_median_ms(xs) - ref * MS_PER_S, 0.0), MS_DIGITS)]
            for pause, xs in sorted(samples.items())]


@dataclass(frozen=True, slots=True)
class MixedCell:
    added_ms: float  # median mixed step minus median pure decode step
    decode_ms: float  # that pure decode step: the window's own time base
    context: float  # mean context of the decoding requests in those steps
    steps: int


def mixed_cells(run: EngineRun) -> dict[tuple[int, int], MixedCell]:
    """(B, n) -> cell over the ``mixed`` windows of B decodes and n prompt tokens; a
    window without both a mixed step and a pure decode step of its B (e.g. the engine
    split the prompts over two steps) is left out."""
    mixed: dict[tuple[int, int], list[float]] = defaultdict(list)
    plain: dict[tuple[int, int], list[StepRecord]] = defaultdict(list)
    for t in attribute(run):
        w, s = t.window, t.step
        if w is None or w.kind != "mixed" or s.batch_size != w.batch_size:
            continue
        key = (w.batch_size, w.context)
        if s.prefill_tokens == w.context:
            mixed[key].append(s.step_time_s)
        elif not s.prefill_tokens:
            plain[key].append(s)
    out = {}
    for key, xs in mixed.items():
        if not plain.get(key):
            continue
        decode = _median_ms([s.step_time_s for s in plain[key]])
        ctx = [s.mean_context_len for s in plain[key] if s.mean_context_len == s.mean_context_len]
        out[key] = MixedCell(round(max(_median_ms(xs) - decode, 0.0), MS_DIGITS), decode,
                             float(statistics.median(ctx)) if ctx else float("nan"), len(xs))
    return out


def mixed_rows(
    run: EngineRun, batch_sizes: tuple[int, ...], tokens: tuple[int, ...]
) -> list[list[Any]]:
    """The ``mixed`` table ``[B, tokens, added_ms]`` (a full grid), or [] when not measured."""
    return [[b, n, c.added_ms] for b, n, c in _mixed_grid(run, batch_sizes, tokens)]


def _mixed_grid(
    run: EngineRun, batch_sizes: tuple[int, ...], tokens: tuple[int, ...]
) -> list[tuple[int, int, MixedCell]]:
    if not batch_sizes or not tokens:
        return []
    cells = mixed_cells(run)
    return [
        (b, n, _need(cells, (b, n), f"mixed B={b} prompt tokens={n}"))
        for b in batch_sizes
        for n in tokens
    ]


def mixed_counts(
    run: EngineRun, batch_sizes: tuple[int, ...], tokens: tuple[int, ...]
) -> list[list[int]]:
    """``[B, tokens, steps]``: how many mixed steps (B decodes and exactly that many
    prompt tokens in one step) each ``mixed`` cell is the median of; 0 where none ran."""
    cells = mixed_cells(run)
    return [[b, n, cells[(b, n)].steps if (b, n) in cells else 0]
            for b in batch_sizes for n in tokens]


def mixed_rows_rebased(
    run: EngineRun, batch_sizes: tuple[int, ...], tokens: tuple[int, ...],
    decode_ms: Callable[[int, float], float],
) -> list[list[Any]]:
    """The ``mixed`` table for a profile measured at another time: each cell's added
    time is expressed in that profile's time base, ``added * decode_ms(B, context) /
    the window's own decode step`` (on a shared machine the load, and with it every
    step, changes between sessions; the ratio of a mixed step to the decode step run
    just before it does not)."""
    return [
        [b, n, round(c.added_ms * decode_ms(b, c.context) / c.decode_ms, MS_DIGITS)]
        for b, n, c in _mixed_grid(run, batch_sizes, tokens)
    ]


def acceptance(
    runs: list[EngineRun], kind: str, gamma: int
) -> tuple[float, float, int] | None:
    """Mean per-position acceptance ``a`` and a Beta concentration over requests.

    Each request's accepted/drafted ratio at gamma G is inverted through the
    truncated geometric law (the simulator's), so the mean is the simulator's ``a``;
    the concentration is the method-of-moments fit ``m (1 - m) / var - 1``.
    """
    from nightjar.core.acceptance import alpha_from_ratio

    alphas: list[float] = []
    for run in runs:
        if not run.drafted:
            continue
        ids = {rid for w in run.windows if w.kind == kind for rid in w.request_ids}
        ratios = [
            c["accepted"] / c["drafted"]
            for rid, c in run.requests.items()
            if rid.split("-")[0] in ids and c["drafted"] > 0
        ]
        if ratios:
            alphas += alpha_from_ratio(np.array(ratios), float(gamma)).tolist()
    if not alphas:
        return None
    m = min(max(float(np.mean(alphas)), 0.001), 0.99)
    var = float(np.var(alphas))
    conc = MAX_CONCENTRATION if var <= 0 else m * (1 - m) / var - 1
    return m, min(max(conc, 1.0), MAX_CONCENTRATION), len(alphas)


def _need(cells: dict[Any, Any], key: Any, what: str) -> Any:
    if key not in cells:
        raise NightjarInputError(
            f"measured profile: no clean {what} steps; raise --output-tokens or --kv-cache-gb"
        )
    return cells[key]


@dataclass(frozen=True, slots=True)
class Grid:
    batch_sizes: tuple[int, ...]
    gammas: tuple[int, ...]
    contexts: tuple[int, ...]


def decode_rows(
    grid: Grid, nodraft: EngineRun, draft: EngineRun
) -> tuple[list[DecodeRow], list[DraftForwardRow]]:
    """The ``decode`` and ``draft_forward`` tables (full grids): gamma 0 from the no-draft
    engine, every other gamma and the synced draft pass from the draft engine."""
    cells = {g: decode_cells(nodraft if g == 0 else draft, g) for g in grid.gammas}
    fwd_cells = decode_cells(draft, 0)
    decode, fwd = [], []
    for b in grid.batch_sizes:
        for c in grid.contexts:
            for g in grid.gammas:
                step, draft_ms, verify, _ = _need(cells[g], (b, c), f"B={b} gamma={g} context={c}")
                decode.append(DecodeRow(b, g, c, step, 0.0 if g == 0 else draft_ms, verify))
            draft1 = _need(fwd_cells, (b, c), f"draft-forward B={b} context={c}")[1]
            fwd.append(DraftForwardRow(b, c, draft1))
    return decode, fwd


def decode_counts(grid: Grid, nodraft: EngineRun, draft: EngineRun) -> list[list[int]]:
    """``[B, gamma, C, steps]``: how many clean steps each decode cell is the median of
    (steps in which the engine ran exactly B requests, verifying and proposing that
    gamma), gamma 0 from the no-draft engine as in :func:`decode_rows`."""
    cells = {g: decode_cells(nodraft if g == 0 else draft, g) for g in grid.gammas}
    return [[b, g, c, cells[g][(b, c)][3] if (b, c) in cells[g] else 0]
            for b in grid.batch_sizes for c in grid.contexts for g in grid.gammas]


def prefill_rows(nodraft: EngineRun, draft: EngineRun) -> list[PrefillRow]:
    target, draft_cells = prefill_cells(nodraft), prefill_cells(draft)
    rows = [PrefillRow(n, target[n][0], draft_cells[n][1])
            for n in sorted(set(target) & set(draft_cells))]
    if not rows:
        raise NightjarInputError("measured profile: no prefill step was measured cleanly")
    return rows


def memory_facts(facts: dict[str, Any], blocks_with: int, blocks_without: int) -> MemoryFacts:
    """The profile's ``memory`` facts, calibrated on the pool vLLM gave the draft engine.

    Everything is read from the engine except ``activation_reserve_bytes``, the one
    calibrated input (as for the roofline profiles): it is set so that the profile's
    memory model reproduces the with-draft block count exactly. The no-draft count the
    model then predicts is compared with the measured one in the profile's
    ``measured.kv_blocks`` (on CPU, and with a fixed ``--kv-cache-gb``, the pool does
    not grow into the draft's bytes, so the two differ by design).
    """
    bs = int(facts["block_size"])
    tkv, dkv = int(facts["target_kv_bytes_per_token"]), int(facts["draft_kv_bytes_per_token"])
    budget = facts["device_bytes"] * facts["gpu_memory_utilization"]
    used = facts["target_weight_bytes"] + facts["draft_weight_bytes"]
    # The + 0.5 block keeps floor() at blocks_with despite float rounding.
    reserve = budget - used - (blocks_with + 0.5) * bs * (tkv + dkv)
    return MemoryFacts(
        device_bytes=int(facts["device_bytes"]),
        gpu_memory_utilization=float(facts["gpu_memory_utilization"]),
        target_weight_bytes=int(facts["target_weight_bytes"]),
        draft_weight_bytes=int(facts["draft_weight_bytes"]),
        activation_reserve_bytes=max(0, int(reserve)),
        target_kv_bytes_per_token=tkv,
        draft_kv_bytes_per_token=dkv,
        block_size=bs,
        host_link_bytes_per_s=float(facts["host_link_bytes_per_s"]),
        device_bandwidth_bytes_per_s=float(facts["device_bandwidth_bytes_per_s"]),
    )
