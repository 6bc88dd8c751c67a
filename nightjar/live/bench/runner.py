"""Runs a benchmark schedule on shared engines, measuring the machine's load as it goes.

One engine start serves every run of its kind: policies that speculate share an engine
with the draft (each run opens with a policy switch, :mod:`nightjar.live.run_switch`),
and policies that never speculate (``nospec``) share one without a draft, as
``nightjar live`` serves them (no draft's KV, no draft slots in the token budget).
Both engines stay up for the whole benchmark; only one serves at a time. Each run is
wrapped in a :class:`nightjar.live.load.LoadMeter`; a run during which others used
more than ``max_foreign_pct`` of the engine's cores is run again, up to ``retries``
times, and kept marked ``loaded`` if the machine never quietened. Before the first
round each engine serves a short warm-up (not recorded). Several traces share the
engines and the rounds (:meth:`BenchPlan.rounds` says in which order).
Call :func:`nightjar.live.engine_spec.prepare_env` first.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightjar.core.records import RunResult
from nightjar.errors import NightjarInputError
from nightjar.live.bench.rotation import BenchPlan, Slot
from nightjar.live.engine_spec import EngineSpec
from nightjar.live.load import LoadMeter, LoadRecord
from nightjar.live.replay import ReplayOptions, serve_trace, started
from nightjar.live.run_switch import RunStart
from nightjar.live.steplog import read_log
from nightjar.policies.registry import spec_needs_draft
from nightjar.trace.trace import Trace

# Seconds between runs: an idle vLLM worker keeps spinning on its input queue for 1 s
# after its last step (vLLM's SpinCondition), which would load the next run's cores.
SETTLE_S = 2.0
# The warm-up: this many of the trace's first requests, arrivals 10x faster, outputs
# capped, on each engine (first forwards of each shape are slower: allocation, oneDNN).
WARMUP_REQUESTS = 16
WARMUP_OUTPUT = 16


@dataclass(frozen=True, slots=True)
class BenchSetup:
    traces: tuple[Trace, ...]  # the plan's Slot.trace indexes these
    draft_engine: EngineSpec | None  # None: no policy speculates
    plain_engine: EngineSpec | None  # None: every policy speculates
    options: ReplayOptions
    cores: tuple[int, ...]
    workdir: Path  # step logs go here
    max_foreign_pct: float = 10.0
    retries: int = 2
    warmup: bool = True


@dataclass
class BenchRun:
    slot: Slot
    result: RunResult
    load: LoadRecord
    wall_s: float
    attempts: int
    loaded: bool  # still above the load threshold after every retry
    earlier_loads: list[float] = dataclasses.field(default_factory=list)  # refused attempts
    started_s: float = 0.0  # the kept attempt's start, seconds after the engines were up


# Called with each event: ("warmup", engine label), ("run", BenchRun), ("retry", Slot, pct).
Report = Callable[..., None]
# Called with (slot, requests done) about twice a second during a run.
Progress = Callable[[Slot, int], None]


def engine_specs(base: EngineSpec, plan: BenchPlan) -> tuple[EngineSpec | None, EngineSpec | None]:
    """(the draft engine, the no-draft engine) the plan's policies need."""
    drafted = [p for p in plan.policies if spec_needs_draft(p)]
    plain = [p for p in plan.policies if not spec_needs_draft(p)]
    if drafted and base.draft is None:
        raise NightjarInputError("policies other than nospec need a draft model (--draft)")
    settings = dataclasses.replace(base.settings, switch_runs=True)
    draft = (dataclasses.replace(base, settings=dataclasses.replace(settings, policy=drafted[0]))
             if drafted else None)
    nodraft = (dataclasses.replace(base, draft=None, settings=dataclasses.replace(
        settings, policy=plain[0], gamma_max=0)) if plain else None)
    return draft, nodraft


def pin(cores: tuple[int, ...]) -> None:
    """Pin this process (every thread it has) to ``cores``; children inherit it."""
    for task in Path("/proc/self/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), cores)
        except OSError:
            continue  # a thread that just ended
    os.sched_setaffinity(0, cores)


def _warmup_trace(trace: Trace) -> Trace:
    import numpy as np

    n = min(WARMUP_REQUESTS, len(trace))
    return dataclasses.replace(
        trace,
        name=f"{trace.name}-warmup",
        arrival_s=(trace.arrival_s[:n] - trace.arrival_s[:n].min()) * 0.1,
        prompt_tokens=trace.prompt_tokens[:n],
        output_tokens=np.minimum(trace.output_tokens[:n], WARMUP_OUTPUT),
        workload=trace.workload[:n],
        acceptance=trace.acceptance[:n],
        prompts=trace.prompts[:n] if trace.prompts is not None else None,
        span_s=None,
        speculate=trace.speculate[:n] if trace.speculate is not None else None,
    )


def _started_as(log: Path, policy: str) -> bool:
    """Whether the scheduler opened this run (its step log starts with our policy)."""
    events = read_log(log).events
    return any(e.get("event") == "start" and e.get("policy") == policy for e in events)


def _log_path(setup: BenchSetup, slot: Slot) -> Path:
    name = f"round-{slot.round}-{slot.position}.steps.jsonl"
    return setup.workdir / (name if len(setup.traces) == 1 else f"trace-{slot.trace}-{name}")


async def _one_run(
    engine: Any, spec: EngineSpec, setup: BenchSetup, slot: Slot, log: Path,
    progress: Progress | None,
) -> tuple[RunResult, LoadRecord, float]:
    log.unlink(missing_ok=True)
    run = RunStart(slot.policy, str(log), spec.settings.seed)
    started_at = time.monotonic()
    with LoadMeter(setup.cores) as meter:
        result, _ = await serve_trace(
            engine, setup.traces[slot.trace], spec, setup.options,
            (lambda done: progress(slot, done)) if progress is not None else None, run,
        )
    if not _started_as(log, slot.policy):
        raise NightjarInputError(
            f"the engine did not switch to {slot.policy!r} for round {slot.round} (it was "
            "not idle when the run opened); this is a bug, not a bad input"
        )
    result.policy = slot.label
    return result, meter.record, time.monotonic() - started_at


@dataclass
class BenchOutcome:
    runs: list[BenchRun]  # in the order they ran
    engine_starts: int  # one per kind of engine the plan needs, whatever its length


async def _bench(
    setup: BenchSetup, plan: BenchPlan, report: Report, progress: Progress | None
) -> BenchOutcome:
    runs: list[BenchRun] = []
    async with contextlib.AsyncExitStack() as stack:
        engines = await _start_engines(stack, setup, report)
        up = time.monotonic()
        for slots in plan.rounds():
            for slot in slots:
                spec, engine = engines[spec_needs_draft(slot.policy)]
                log = _log_path(setup, slot)
                loads: list[float] = []
                for attempt in range(1, setup.retries + 2):
                    await asyncio.sleep(SETTLE_S)
                    began = time.monotonic() - up
                    result, load, wall = await _one_run(engine, spec, setup, slot, log, progress)
                    quiet = load.foreign_pct <= setup.max_foreign_pct
                    if quiet or attempt == setup.retries + 1 or not load.available:
                        break
                    loads.append(load.foreign_pct)
                    report("retry", slot, load.foreign_pct)
                done = BenchRun(slot, result, load, wall, attempt, not quiet, loads, began)
                runs.append(done)
                report("run", done)
    return BenchOutcome(runs, len(engines))


async def _start_engines(
    stack: contextlib.AsyncExitStack, setup: BenchSetup, report: Report
) -> dict[bool, tuple[EngineSpec, Any]]:
    """``{True: the draft engine, False: the no-draft one}`` (those the plan needs), each
    started, warmed up and registered on ``stack`` for shutdown."""
    out: dict[bool, tuple[EngineSpec, Any]] = {}
    for drafted, spec in ((False, setup.plain_engine), (True, setup.draft_engine)):
        if spec is None:
            continue
        # A configuration the scheduler refuses comes back as one line through this file.
        error_file = setup.workdir / f"startup-{int(drafted)}.error"
        error_file.unlink(missing_ok=True)
        spec = dataclasses.replace(spec, settings=dataclasses.replace(
            spec.settings, error_file=str(error_file)))
        engine = await stack.enter_async_context(started(spec))
        out[drafted] = (spec, engine)
        if setup.warmup:
            log = setup.workdir / f"warmup-{int(drafted)}.steps.jsonl"
            run = RunStart(spec.settings.policy, str(log), spec.settings.seed)
            warmup = _warmup_trace(setup.traces[0])
            await serve_trace(engine, warmup, spec, setup.options, None, run)
            report("warmup", "the draft engine" if drafted else "the no-draft engine")
    return out


def run_bench(
    setup: BenchSetup, plan: BenchPlan, report: Report, progress: Progress | None = None
) -> BenchOutcome:
    """Run every slot of ``plan`` (the runs come back in the order they ran)."""
    setup.workdir.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_bench(setup, plan, report, progress))
