"""The measured profiler: builds a profile's tables by running the real vLLM engine.

Two engines, both started once and kept up for the whole measurement, with Nightjar's
scheduler and worker plugged in, exactly as ``nightjar live`` runs them:

- no draft at all (``nospec``): gamma-0 decode steps, the target's prefill, and the
  mixed steps (decodes and prompt tokens in one forward);
- the target with the draft (``num_speculative_tokens`` = the largest gamma, the
  draft's KV kept in sync): every gamma at once. Its decode windows run a gamma
  cycle (``decode-cycle:1,2,3,0/3``, rotated per window): K changes every few pure
  decode steps over the same batch, and a step whose verified K and proposed K are
  both G is exactly a ``fixed:G`` step (K set at step t is verified at t + 1), so
  every gamma is measured in the same batch states, seconds apart, and the gamma-0
  steps of the cycle (one synced draft pass) give the draft-forward table. Its prefill windows run
  ``fixed:0`` (one draft pass over the prompt: the draft's prefill) and one window at
  ``fixed:G`` measures acceptance. Each window opens with a run switch
  (:mod:`nightjar.live.run_switch`), so one engine start serves them all.

The no-draft engine also measures the wake: a short prefill after each of a few
pauses, each followed at once by the same prefill back to back (``build.wake_rows``).
Every other prefill window follows a step of its own engine at once (a throwaway
prefill opens each engine's series), so the prefill table holds no wake.

The grid is measured ``repeats`` times, the engines alternating pair by pair of
windows, so that a load change lands on both engines' cells. Cells that then
contradict the cost model (a larger gamma or batch cheaper than a smaller one,
:mod:`nightjar.profile.check`) are measured again, up to ``remeasure`` passes, their
windows pooled. A warm-up window per engine both warms the engines and times them: the
expected duration is printed from it before the grid starts. The machine's load over
the whole measurement (:mod:`nightjar.live.load`) and the CPU thread binding go into
the profile's ``measured`` header. Step times come from the scheduler's step log
(schedule start to output), split times from the worker probe (``probe``);
aggregation is in ``build``. Call :func:`nightjar.live.engine_spec.prepare_env` first.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from nightjar.live.binding import current_binding
from nightjar.live.load import LoadMeter
from nightjar.live.profiling.build import (
    EngineRun,
    Grid,
    acceptance,
    decode_counts,
    decode_rows,
    memory_facts,
    mixed_cells,
    mixed_counts,
    mixed_rows,
    mixed_rows_rebased,
    prefill_rows,
    wake_rows,
)
from nightjar.live.profiling.estimate import Rates, grid_seconds
from nightjar.live.profiling.grid import PREFILL_PROMPT, ProfilePlan
from nightjar.live.profiling.session import (
    DRAFT,
    NODRAFT,
    Progress,
    Session,
    kv_pool,
    started_engines,
    window_count,
)
from nightjar.profile.check import Inversion, inversions
from nightjar.profile.document import MixedRow, ProfileDocument, WakeRow

__all__ = ["PREFILL_PROMPT", "ProfilePlan", "measure_mixed", "measure_profile"]

# (label, windows measured, windows in all) after each measured window.
Tick = Callable[[str, int, int], None]
WARMUP_TOKENS = 8
WARMUP_PREFILL = 1024  # prompt tokens of the warm-up prefill window


def _warm_and_estimate(session: Session) -> float:
    """Warm both engines up (windows not counted) and estimate the grid's seconds from
    the speeds the last of them show: a prefill, decode at the smallest and largest
    batch (:mod:`nightjar.live.profiling.estimate`)."""
    plan = session.plan
    c0, b_max = min(plan.contexts), max(plan.batch_sizes)
    prompt = c0 - WARMUP_TOKENS // 2
    rates: dict[str, Rates] = {}
    for label in session.engines:
        session.decode(label, (1,), c0, WARMUP_TOKENS, counted=False)  # a cold start
        w = session.prefill(label, WARMUP_PREFILL, counted=False)
        prompt_s = (w.end - w.start) / WARMUP_PREFILL
        step: dict[int, float] = {}
        for b in (b_max, 1):
            w = session.decode(label, (b,), c0, WARMUP_TOKENS, counted=False)
            step[b] = max(w.end - w.start - prompt_s * b * prompt, 0.0) / WARMUP_TOKENS
        rates[label] = Rates(prompt_s, step[1], step[b_max], b_max)
    # The warm-up windows are not measurements: forget what they recorded.
    for label in session.engines:
        session.windows[label].clear()
        session.engines[label].llm.collective_rpc("nightjar_probe_take")
    return grid_seconds(plan, rates)


def measure_profile(
    plan: ProfilePlan, progress: Progress | None = None, tick: Tick | None = None
) -> tuple[dict[str, Any], list[Inversion]]:
    """Run both engines and return the profile JSON (nightjar.profile.document), with the decode
    cells that still contradict the cost model after ``plan.remeasure`` passes.

    ``progress`` gets a line per stage; ``tick`` is called after each measured window.
    """
    say = progress or (lambda _msg: None)
    label = "measured windows"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nightjar-profile-") as tmp:
        say("starting 2 engines (no draft; draft, every gamma interleaved)")
        # The meter's last reading must see the engines' processes alive: once shut
        # down (and not always reaped into ours), their CPU time would read as foreign
        # (45% on a quiet machine, with the meter around the engines' teardown).
        with started_engines(plan, Path(tmp), (NODRAFT, DRAFT)) as engines, LoadMeter() as meter:
            # The smaller pool, in the larger block (each request rounds up to one).
            pools = [kv_pool(e) for e in engines.values()]
            block = max(size for _, size in pools)
            blocks = min(n * size for n, size in pools) // block
            pool = blocks * block
            plan = _within_pool(plan, blocks, block, say)
            total = window_count(plan)
            session = Session(plan, engines, lambda k: tick(label, k, total) if tick else None)
            estimate = _warm_and_estimate(session)
            say(f"engines up in {time.monotonic() - started:.0f} s; the grid should take about "
                f"{estimate / 60:.1f} min more (from the warm-up windows; "
                f"{plan.repeats} repeats)")
            for repeat in range(plan.repeats):
                session.grid(repeat)
                say(f"  repeat {repeat + 1}/{plan.repeats} done at "
                    f"{(time.monotonic() - started) / 60:.1f} min, load {os.getloadavg()[0]:.1f}")
            session.accept()
            session.fill(say)
            runs = session.collect()
            data = assemble(plan, runs)
            bad = inversions(data)
            again: list[list[float]] = []
            for attempt in range(plan.remeasure):
                if not bad:
                    break
                cells = _cells_of(bad)
                say(f"  {len(bad)} decode cells contradict a smaller gamma or batch; measuring "
                    f"{len(cells)} (B, context) points again ({attempt + 1}/{plan.remeasure})")
                for k, (b, c) in enumerate(cells):
                    session.decode_pair((b,), int(c), NODRAFT if k % 2 == 0 else DRAFT)
                    again.append([b, c])
                session.fill(say)
                runs = session.collect()
                data = assemble(plan, runs)
                bad = inversions(data)
    data["measured"]["seconds"] = round(time.monotonic() - started, 1)
    # What bounded the decode grid's batches: the engine's cap, and its KV pool.
    data["measured"]["batch_cap"] = {"max_num_seqs": plan.max_num_seqs, "pool_tokens": pool,
                                     "largest_batch": max(plan.batch_sizes)}
    data["measured"]["load"] = meter.record.to_json()
    data["measured"]["cpu_binding"] = current_binding().to_json()
    # (B, context) points measured again because their cells contradicted the model.
    data["measured"]["remeasured"] = again
    say(f"  {meter.record.summary}")
    return data, bad


def _within_pool(plan: ProfilePlan, blocks: int, block: int, say: Progress) -> ProfilePlan:
    """``plan`` with its batches cut to what ``blocks`` KV blocks of ``block`` tokens
    hold, said aloud."""
    fitted = plan.within_pool(blocks, block)
    tokens = blocks * block
    largest = max(fitted.batch_sizes)
    if fitted is not plan:
        say(f"the KV pool holds {tokens} tokens: decode batches up to {largest} (not "
            f"{max(plan.batch_sizes)}) at context {max(plan.contexts)}; larger ones are "
            "priced along the table's last segment (raise --kv-cache-gb to measure them)")
    fitted.check()
    return fitted


def _cells_of(found: list[Inversion]) -> list[tuple[int, float]]:
    """The (B, context) points whose windows a re-measure repeats."""
    out: list[tuple[int, float]] = []
    for inv in found:
        points = [(inv.batch_size, inv.context_len)]
        if inv.axis == "batch":
            points.append((inv.next_value, inv.context_len))
        for p in points:
            if p not in out:
                out.append(p)
    return out


def assemble(plan: ProfilePlan, runs: dict[str, EngineRun]) -> dict[str, Any]:
    from vllm import __version__ as vllm_version

    grid = Grid(plan.batch_sizes, plan.gammas, plan.contexts)
    nodraft, draft = runs[NODRAFT], runs[DRAFT]
    decode, fwd = decode_rows(grid, nodraft, draft)
    facts = draft.facts
    with_d, without = draft.pool_blocks, nodraft.pool_blocks
    acc = acceptance([draft], "accept", plan.gamma_max)
    platform = str(facts["platform"])
    gpu = "cpu" if platform == "cpu" else _slug(str(facts["device_name"]))
    return ProfileDocument(
        name=f"{gpu}/{plan.target_name}+{plan.draft_name}",
        source="measured",
        command=plan.command or "nightjar profile (called from Python)",
        notes="Measured with vLLM (nightjar.live.profiling.profiler): two engines, every "
        "gamma interleaved step by step in the one with the draft; medians over every "
        f"clean step of {plan.repeats} repeat(s). Acceptance measured on "
        + ("the --prompts texts." if plan.prompts else "random token prompts."),
        gpu=gpu,
        target=plan.target_name,
        draft=plan.draft_name,
        hardware={
            "platform": platform,
            "description": facts["device_name"],
            "cpu_model": facts["cpu_model"],
            "cpu_count": facts["cpu_count"],
            "dtype": facts["dtype"],
            "torch": facts["torch"],
            "vllm": vllm_version,
            "target_path": plan.target,
            "draft_path": plan.draft,
        },
        measured={
            "kv_blocks": {"with_draft": with_d, "without_draft": without},
            "kv_cache_bytes": plan.kv_cache_bytes,
            "max_model_len": plan.max_model_len,
            "max_num_batched_tokens": plan.token_budget,
            "output_tokens": plan.output_tokens,
            "repeats": plan.repeats,
            "gamma_hold": plan.hold,
            "acceptance_requests": acc[2] if acc else 0,
            # [B, gamma, context, clean steps]: what each decode cell is the median of.
            "decode_steps": decode_counts(grid, nodraft, draft),
            # [B, prompt tokens, mixed steps]: what each mixed cell is the median of.
            "mixed_steps": mixed_counts(nodraft, plan.mixed_batch_sizes, plan.mixed_tokens),
            "engines": {label: {"steps": len(r.steps), "windows": len(r.windows)}
                        for label, r in runs.items()},
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        memory=memory_facts(facts, with_d, without),
        decode=decode,
        draft_forward=fwd,
        prefill=prefill_rows(nodraft, draft),
        mixed=[MixedRow(*row) for row in mixed_rows(nodraft, plan.mixed_batch_sizes,
                                                     plan.mixed_tokens)],
        wake=[WakeRow(*row) for row in wake_rows(nodraft)],
        acceptance={} if acc is None else {plan.workload: (round(acc[0], 4), round(acc[1], 2))},
        # A draft model is the format's default: the document leaves the key out.
        drafter=plan.method,
    ).to_json()


def measure_mixed(
    plan: ProfilePlan, decode_ms: Callable[[int, float], float], progress: Progress | None = None
) -> list[Any]:
    """Only the no-draft engine's mixed windows: the ``mixed`` rows to add to a profile
    measured before the table existed (the other tables are left as they were), in
    that profile's time base (``decode_ms(B, context)``: its gamma-0 decode step;
    ``build.mixed_rows_rebased``)."""
    only = replace(plan, only_mixed=True)
    with tempfile.TemporaryDirectory(prefix="nightjar-profile-") as tmp:
        t = time.monotonic()
        with started_engines(only, Path(tmp), (NODRAFT,)) as engines:
            session = Session(only, engines, lambda _k: None)
            for repeat in range(only.repeats):
                session.grid(repeat)
            run = session.collect()[NODRAFT]
        if progress is not None:
            progress(f"  no draft (mixed steps): {len(run.steps)} steps in "
                     f"{time.monotonic() - t:.0f} s, load {os.getloadavg()[0]:.1f}")
    if progress is not None:
        for (b, n), c in sorted(mixed_cells(run).items()):
            progress(f"  B={b} +{n} prompt tokens: adds {c.added_ms:.0f} ms to a "
                     f"{c.decode_ms:.0f} ms decode step (context {c.context:.0f}; the "
                     f"profile's: {decode_ms(b, c.context):.0f} ms)")
    rows: list[Any] = mixed_rows_rebased(
        run, plan.mixed_batch_sizes, plan.mixed_tokens, decode_ms
    )
    return rows


def _slug(name: str) -> str:
    return "-".join(name.lower().replace("nvidia", "").split()) or "gpu"


def command_line(argv: list[str]) -> str:
    return shlex.join(["nightjar", *argv])
