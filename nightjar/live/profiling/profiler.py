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
  (:mod:`nightjar.live.plugins.runs`), so one engine start serves them all.

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
aggregation is in ``build``. Call :func:`nightjar.live.plugins.engine.prepare_env` first.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shlex
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from nightjar.core.drafter import DRAFT_MODEL
from nightjar.errors import NightjarInputError
from nightjar.live.binding import current_binding
from nightjar.live.load import LoadMeter
from nightjar.live.plugins.engine import EngineSpec, engine_kwargs
from nightjar.live.profiling.build import (
    EngineRun,
    Grid,
    Window,
    acceptance,
    decode_cells,
    decode_counts,
    decode_rows,
    memory_facts,
    mixed_cells,
    mixed_rows,
    mixed_rows_rebased,
    prefill_rows,
    wake_rows,
)
from nightjar.live.profiling.plan import PREFILL_PROMPT, ProfilePlan
from nightjar.live.profiling.windows import (
    Engine,
    accept_window,
    decode_window,
    mixed_windows,
    prefill_window,
)
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log
from nightjar.profile.check import Inversion, inversions

__all__ = ["PREFILL_PROMPT", "ProfilePlan", "decode_cycle", "measure_mixed", "measure_profile"]

PROBE = "nightjar.live.profiling.probe.ProfileProbe"
Progress = Callable[[str], None]
# (label, windows measured, windows in all) after each measured window.
Tick = Callable[[str, int, int], None]
# Seconds between windows of different engines: an idle vLLM worker keeps spinning on
# its queue for 1 s after its last step (vLLM's SpinCondition), on the cores the
# other engine's window needs.
SETTLE_S = 1.2
WARMUP_TOKENS = 8
# Wake windows per pause in each repeat (each with its back-to-back twin).
WAKE_SAMPLES = 3
# A decode cell needs this many clean steps (over all its windows) to be written; up
# to FILL_PASSES extra passes measure the short ones again.
MIN_STEPS = 3
FILL_PASSES = 3
NODRAFT, DRAFT = "no draft", "draft"


def decode_cycle(gammas: tuple[int, ...], hold: int, shift: int) -> str:
    """The draft engine's decode-window policy: every gamma, ``hold`` pure decode steps
    each (``decode-cycle``: the prompts' prefill steps do not move it), the speculating
    ones first, the start rotated by ``shift`` (so that no gamma always gets a window's
    first, shortest-context steps)."""
    order = [g for g in gammas if g > 0] + [0]
    k = shift % len(order)
    order = order[k:] + order[:k]
    return f"decode-cycle:{','.join(str(g) for g in order)}/{hold}"


def _first_index(gammas: tuple[int, ...], first: int) -> int:
    return ([g for g in gammas if g > 0] + [0]).index(first)


@contextlib.contextmanager
def in_process_engine(enabled: bool = True) -> Iterator[None]:
    """Run the engine cores in this process, and undo what that leaves behind.

    With the core in this process, ``LLMEngine.add_request`` and ``LLMEngine.step``
    act at once and in order: a test can drive an engine step by step and add
    requests at a given step, whatever the machine's speed."""
    key = "VLLM_ENABLE_V1_MULTIPROCESSING"
    old = os.environ.get(key)
    os.environ[key] = "0" if enabled else "1"
    try:
        yield
    finally:
        import vllm.envs

        if old is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = old
        # An in-process engine core freezes the GC heap and caches vLLM's
        # environment; later engines (and tests) in this process must not inherit it.
        vllm.envs.disable_envs_cache()
        gc.unfreeze()
        gc.collect()


def _spec(plan: ProfilePlan, drafted: bool, log: Path) -> EngineSpec:
    settings = LiveSettings(
        policy=f"fixed:{plan.gamma_max}" if drafted else "nospec",
        gamma_max=plan.gamma_max if drafted else 0,
        seed=plan.seed,
        step_log=str(log),
        # The draft runs on K = 0 steps too: the draft-forward table, and a draft KV
        # that stays current however K cycles (acceptance as at a fixed gamma).
        draft_kv="sync",
        switch_runs=drafted,
    )
    return EngineSpec(
        plan.target,
        plan.draft if drafted else None,
        settings,
        max_model_len=plan.max_model_len,
        max_num_seqs=max(plan.batch_sizes),
        kv_cache_bytes=plan.kv_cache_bytes,
        spec_tokens=plan.gamma_max,
        method=plan.method,
        spec_options=dict(plan.spec_options),
        speculate=drafted,
    )


@contextlib.contextmanager
def _engines(plan: ProfilePlan, workdir: Path, which: tuple[str, ...]
             ) -> Iterator[dict[str, Engine]]:
    """The engines named in ``which``, started with the probe, shut down at the end."""
    from vllm import LLM

    started: dict[str, Engine] = {}
    with in_process_engine(plan.in_process):
        try:
            for label in which:
                drafted = label == DRAFT
                log = workdir / f"steps-{'draft' if drafted else 'nodraft'}.jsonl"
                log.unlink(missing_ok=True)
                kwargs = engine_kwargs(_spec(plan, drafted, log))
                kwargs["worker_extension_cls"] = PROBE
                kwargs["max_num_batched_tokens"] = plan.token_budget
                started[label] = Engine(label, LLM(**kwargs), log, drafted, plan.seed,
                                        plan.vocab)
            yield started
        finally:
            for engine in started.values():
                engine.llm.llm_engine.engine_core.shutdown()
            started.clear()


@dataclass
class _Session:
    """Runs windows on the engines and keeps what each recorded."""

    plan: ProfilePlan
    engines: dict[str, Engine]
    tick: Callable[[int], None]
    rng: np.random.Generator = field(default_factory=lambda: np.random.default_rng(0))
    windows: dict[str, list[Window]] = field(default_factory=dict)
    records: dict[str, list[tuple[str, float, float]]] = field(default_factory=dict)
    done: int = 0
    _last: str | None = None
    _cycles: int = 0

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.plan.seed)
        for label, engine in self.engines.items():
            self.windows[label], self.records[label] = [], []
            engine.llm.collective_rpc("nightjar_probe_start")

    def _on(self, label: str) -> Engine:
        if self._last is not None and self._last != label:
            time.sleep(SETTLE_S)
        self._last = label
        return self.engines[label]

    def _keep(self, label: str, window: Window, counted: bool = True) -> None:
        self.windows[label].append(window)
        if counted:
            self.done += 1
            self.tick(self.done)

    def decode(self, label: str, b: int, c: int, output: int | None = None,
               counted: bool = True, first: int | None = None) -> Window:
        engine = self._on(label)
        policy = None
        if engine.drafted:
            plan = self.plan
            shift = self._cycles if first is None else _first_index(plan.gammas, first)
            policy = decode_cycle(plan.gammas, plan.hold, shift)
            self._cycles += 1
        w = decode_window(engine, b, c, output or self.plan.output_tokens, policy, self.rng)
        self._keep(label, w, counted)
        return w

    def decode_pair(self, b: int, c: int, first: str) -> None:
        """(B, c) on both engines, ``first`` first (alternated to halve the switches)."""
        for label in (first, DRAFT if first == NODRAFT else NODRAFT):
            self.decode(label, b, c)

    def prefill(self, label: str, n: int) -> None:
        engine = self._on(label)
        policy = "fixed:0" if engine.drafted else None
        self._keep(label, prefill_window(engine, self.plan.prefill_prompts(n), policy, self.rng))

    def wake_up(self, label: str) -> None:
        """A prefill that is not kept: the measured windows after it follow a step at once."""
        engine = self._on(label)
        policy = "fixed:0" if engine.drafted else None
        prefill_window(engine, self.plan.prefill_prompts(self.plan.wake_tokens), policy, self.rng)

    def wake(self, repeat: int) -> None:
        """No-draft prefills after each pause (rotated per repeat), each followed at once
        by its back-to-back twin: what waking the idle engine adds (``wake_rows``)."""
        plan = self.plan
        self.wake_up(NODRAFT)
        engine = self.engines[NODRAFT]
        prompts = plan.prefill_prompts(plan.wake_tokens)
        k = repeat % len(plan.wake_pauses)
        for pause in plan.wake_pauses[k:] + plan.wake_pauses[:k]:
            for _ in range(WAKE_SAMPLES):
                time.sleep(pause)
                for idle in (pause, 0.0):
                    w = prefill_window(engine, prompts, None, self.rng)
                    self._keep(NODRAFT, replace(w, kind="wake", pause_s=idle))

    def mixed(self) -> None:
        engine = self._on(NODRAFT)
        for b in self.plan.mixed_batch_sizes:
            tag = f"mix{b}x{len(self.windows[NODRAFT])}"
            for w in mixed_windows(engine, b, self.plan.mixed_tokens, self.plan.prefill_prompts,
                                   self.rng, tag, lambda: None):
                self._keep(NODRAFT, w)

    def accept(self) -> None:
        engine = self._on(DRAFT)
        plan = self.plan
        if plan.prompts:
            from vllm.inputs import TextPrompt

            prompts: list[Any] = [TextPrompt(prompt=p) for p in plan.prompts]
        else:
            prompts = engine.prompts(max(plan.batch_sizes), min(plan.contexts)
                                     - plan.output_tokens // 2, self.rng)
        self._keep(DRAFT, accept_window(engine, prompts, plan.output_tokens,
                                        f"fixed:{plan.gamma_max}"))

    def grid(self, repeat: int) -> None:
        """One repeat of the decode grid (both engines), prefill and mixed windows."""
        plan = self.plan
        if not plan.only_mixed:
            order = plan.batch_sizes if repeat % 2 == 0 else plan.batch_sizes[::-1]
            k = 0
            for c in plan.contexts:
                for b in order:
                    self.decode_pair(b, c, NODRAFT if k % 2 == 0 else DRAFT)
                    k += 1
            for label in (NODRAFT, DRAFT):
                self.wake_up(label)
                for n in plan.prefill_lengths:
                    self.prefill(label, n)
        if plan.mixed_tokens:
            self.mixed()
        if plan.wake_pauses and not plan.only_mixed:
            self.wake(repeat)

    def fill(self, say: Progress) -> None:
        """Extra decode windows for every cell with fewer than ``MIN_STEPS`` clean steps
        (a short window at high acceptance can end before the cycle reaches a gamma),
        the draft engine's cycle starting at the gamma that is short."""
        plan = self.plan
        for _ in range(FILL_PASSES):
            runs = self.collect()
            short: list[tuple[str, int, int, int]] = []
            for label, gammas in ((NODRAFT, (0,)), (DRAFT, plan.gammas)):
                for g in gammas:
                    cells = decode_cells(runs[label], g)
                    short += [(label, b, c, g) for c in plan.contexts for b in plan.batch_sizes
                              if cells.get((b, c), (0, 0, 0, 0))[3] < MIN_STEPS]
            if not short:
                return
            say(f"  {len(short)} decode cells have fewer than {MIN_STEPS} clean steps: "
                "measuring them again")
            done: set[tuple[str, int, int]] = set()
            for label, b, c, g in short:
                if (label, b, c) not in done:
                    done.add((label, b, c))
                    self.decode(label, b, c, counted=False, first=g)

    def collect(self) -> dict[str, EngineRun]:
        out = {}
        for label, engine in self.engines.items():
            records = engine.llm.collective_rpc("nightjar_probe_take")[0]
            self.records[label] += [(str(k), float(t), float(d)) for k, t, d in records]
            facts = dict(engine.llm.collective_rpc("nightjar_probe_facts")[0])
            log = read_log(engine.log)
            start = next((e for e in log.events if e.get("event") == "start"), {})
            preempted = sum(c["preemptions"] for c in log.requests.values())
            if preempted:
                raise NightjarInputError(
                    f"measured profile: {preempted} preemptions (KV pool too small for the "
                    "grid); raise --kv-cache-gb or lower --batch-sizes / --contexts"
                )
            out[label] = EngineRun(engine.drafted, log.steps, list(self.records[label]),
                                   list(self.windows[label]), facts,
                                   int(start.get("pool_blocks", 0)), log.requests,
                                   chosen=log.chosen_gamma)
        return out


def window_count(plan: ProfilePlan) -> int:
    """Measured windows of one pass of the grid over both engines (with the accept one)."""
    mixed = len(plan.mixed_batch_sizes) * len(plan.mixed_tokens)
    if plan.only_mixed:
        return plan.repeats * mixed
    decode = 2 * len(plan.contexts) * len(plan.batch_sizes)
    wake = 2 * WAKE_SAMPLES * len(plan.wake_pauses)
    return plan.repeats * (decode + 2 * len(plan.prefill_lengths) + mixed + wake) + 1


def _warm_and_estimate(session: _Session) -> float:
    """Warm both engines up (windows at the smallest and largest batch, not counted)
    and estimate the grid's seconds from how long those took."""
    plan = session.plan
    c0, b_max = min(plan.contexts), max(plan.batch_sizes)
    per_token: dict[str, dict[int, float]] = {}
    for label in session.engines:
        per_token[label] = {}
        for b in (1, b_max):
            w = session.decode(label, b, c0, WARMUP_TOKENS, counted=False)
            per_token[label][b] = (w.end - w.start) / WARMUP_TOKENS
    # The warm-up windows are not measurements: forget what they recorded.
    for label in session.engines:
        session.windows[label].clear()
        session.engines[label].llm.collective_rpc("nightjar_probe_take")

    def window_s(label: str, b: int, c: int, tokens: int) -> float:
        t1, tm = per_token[label][1], per_token[label][b_max]
        per = t1 + (tm - t1) * (b - 1) / max(b_max - 1, 1)
        # Longer contexts: their prompts' prefill and attention, roughly linear in c.
        return tokens * per * (1.0 + c / 1024.0)

    total = 0.0
    if not plan.only_mixed:
        for c in plan.contexts:
            for b in plan.batch_sizes:
                total += sum(window_s(label, b, c, plan.output_tokens)
                             for label in session.engines) + SETTLE_S
        # A prefill step of n tokens costs about n / b_max decode steps at b_max.
        prefill = sum(plan.prefill_lengths) / b_max
        total += sum(window_s(label, b_max, 0, 1) * prefill for label in session.engines)
        wake = WAKE_SAMPLES * len(plan.wake_pauses)
        total += WAKE_SAMPLES * sum(plan.wake_pauses) + 2 * wake * window_s(
            NODRAFT, b_max, 0, 1) * plan.wake_tokens / b_max
    for b in plan.mixed_batch_sizes:
        for n in plan.mixed_tokens:
            total += window_s(NODRAFT, b, 0, 4) + window_s(NODRAFT, b_max, 0, 1) * n / b_max
    return plan.repeats * total + window_s(DRAFT, b_max, c0, plan.output_tokens)


def measure_profile(
    plan: ProfilePlan, progress: Progress | None = None, tick: Tick | None = None
) -> tuple[dict[str, Any], list[Inversion]]:
    """Run both engines and return the profile JSON (format_version 1), with the decode
    cells that still contradict the cost model after ``plan.remeasure`` passes.

    ``progress`` gets a line per stage; ``tick`` is called after each measured window.
    """
    say = progress or (lambda _msg: None)
    total = window_count(plan)
    label = "measured windows"
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="nightjar-profile-") as tmp:
        say(f"starting 2 engines (no draft; draft, every gamma interleaved) for {total} "
            "windows")
        # The meter's last reading must see the engines' processes alive: once shut
        # down (and not always reaped into ours), their CPU time would read as foreign
        # (45% on a quiet machine, with the meter around the engines' teardown).
        with _engines(plan, Path(tmp), (NODRAFT, DRAFT)) as engines, LoadMeter() as meter:
            session = _Session(plan, engines, lambda k: tick(label, k, total) if tick else None)
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
                    session.decode_pair(b, int(c), NODRAFT if k % 2 == 0 else DRAFT)
                    again.append([b, c])
                session.fill(say)
                runs = session.collect()
                data = assemble(plan, runs)
                bad = inversions(data)
    data["measured"]["seconds"] = round(time.monotonic() - started, 1)
    data["measured"]["load"] = meter.record.to_json()
    data["measured"]["cpu_binding"] = current_binding().to_json()
    # (B, context) points measured again because their cells contradicted the model.
    data["measured"]["remeasured"] = again
    say(f"  {meter.record.summary}")
    return data, bad


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
    memory = memory_facts(facts, with_d, without)
    acc = acceptance([draft], "accept", plan.gamma_max)
    platform = str(facts["platform"])
    gpu = "cpu" if platform == "cpu" else _slug(str(facts["device_name"]))
    # Absent means a draft model (the profile format's default).
    kind = {} if plan.method == DRAFT_MODEL else {"drafter": plan.method}
    return {
        **kind,
        "format_version": 1,
        "name": f"{gpu}/{plan.target_name}+{plan.draft_name}",
        "source": "measured",
        "command": plan.command or "nightjar profile (called from Python)",
        "notes": "Measured with vLLM (nightjar.live.profiling.profiler): two engines, every "
        "gamma interleaved step by step in the one with the draft; medians over every "
        f"clean step of {plan.repeats} repeat(s). Acceptance measured on "
        + ("the --prompts texts." if plan.prompts else "random token prompts."),
        "gpu": gpu,
        "target": plan.target_name,
        "draft": plan.draft_name,
        "hardware": {
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
        "measured": {
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
            "engines": {label: {"steps": len(r.steps), "windows": len(r.windows)}
                        for label, r in runs.items()},
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        "memory": memory,
        "decode": decode,
        "draft_forward": fwd,
        "prefill": prefill_rows(nodraft, draft),
        **_mixed_table(plan, nodraft),
        **({"wake": rows} if (rows := wake_rows(nodraft)) else {}),
        "acceptance": {}
        if acc is None
        else {plan.workload: {"mean": round(acc[0], 4), "concentration": round(acc[1], 2)}},
    }


def _mixed_table(plan: ProfilePlan, run: EngineRun) -> dict[str, Any]:
    rows = mixed_rows(run, plan.mixed_batch_sizes, plan.mixed_tokens)
    return {"mixed": rows} if rows else {}


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
        with _engines(only, Path(tmp), (NODRAFT,)) as engines:
            session = _Session(only, engines, lambda _k: None)
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
