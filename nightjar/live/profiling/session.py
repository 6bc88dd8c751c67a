"""The measured profiler's engines and the windows it runs on them, in order.

:class:`Session` runs decode, prefill, mixed, wake and acceptance windows on the two
engines (no draft; the draft with every gamma, :func:`decode_cycle`), a repeat of the
grid at a time, settling between engines, and collects what each engine recorded for
:mod:`nightjar.live.profiling.build`. :mod:`nightjar.live.profiling.profiler` drives it.
"""

from __future__ import annotations

import contextlib
import gc
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from nightjar.errors import NightjarInputError
from nightjar.live.engine_spec import EngineSpec, engine_kwargs
from nightjar.live.profiling.build import EngineRun, Window, decode_cells
from nightjar.live.profiling.grid import ProfilePlan
from nightjar.live.profiling.windows import (
    Engine,
    accept_window,
    decode_window,
    mixed_windows,
    prefill_window,
)
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

PROBE = "nightjar.live.profiling.probe.ProfileProbe"
Progress = Callable[[str], None]
# Seconds between windows of different engines: an idle vLLM worker keeps spinning on
# its queue for 1 s after its last step (vLLM's SpinCondition), on the cores the
# other engine's window needs.
SETTLE_S = 1.2
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
def started_engines(plan: ProfilePlan, workdir: Path, which: tuple[str, ...]
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
class Session:
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

    def decode(self, label: str, rungs: tuple[int, ...], c: int, output: int | None = None,
               counted: bool = True, first: int | None = None) -> Window:
        """One decode window (a ladder when ``rungs`` has more than one batch size)."""
        engine = self._on(label)
        policy = None
        if engine.drafted:
            plan = self.plan
            shift = self._cycles if first is None else _first_index(plan.gammas, first)
            policy = decode_cycle(plan.gammas, plan.hold, shift)
            self._cycles += 1
        w = decode_window(engine, rungs, c, output or self.plan.output_tokens, policy,
                          self.rng)
        self._keep(label, w, counted)
        return w

    def decode_pair(self, rungs: tuple[int, ...], c: int, first: str) -> None:
        """The window on both engines, ``first`` first (alternated to halve the switches)."""
        for label in (first, DRAFT if first == NODRAFT else NODRAFT):
            self.decode(label, rungs, c)

    def prefill(self, label: str, n: int, counted: bool = True) -> Window:
        engine = self._on(label)
        policy = "fixed:0" if engine.drafted else None
        w = prefill_window(engine, self.plan.prefill_prompts(n), policy, self.rng)
        self._keep(label, w, counted)
        return w

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
            k = 0
            for c in plan.contexts:
                windows = plan.decode_chains(c)
                for rungs in windows if repeat % 2 == 0 else windows[::-1]:
                    self.decode_pair(rungs, c, NODRAFT if k % 2 == 0 else DRAFT)
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
                    self.decode(label, (b,), c, counted=False, first=g)

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


def kv_pool(engine: Engine) -> tuple[int, int]:
    """(blocks, tokens a block) of ``engine``'s KV pool (its scheduler logs them at
    start-up)."""
    start = next(e for e in read_log(engine.log).events if e.get("event") == "start")
    return int(start["pool_blocks"]), int(start["engine"]["block_size"])


def window_count(plan: ProfilePlan) -> int:
    """Measured windows of one pass of the grid over both engines (with the accept one)."""
    mixed = len(plan.mixed_batch_sizes) * len(plan.mixed_tokens)
    if plan.only_mixed:
        return plan.repeats * mixed
    decode = 2 * sum(len(plan.decode_chains(c)) for c in plan.contexts)
    wake = 2 * WAKE_SAMPLES * len(plan.wake_pauses)
    return plan.repeats * (decode + 2 * len(plan.prefill_lengths) + mixed + wake) + 1
