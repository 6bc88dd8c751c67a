"""The profiler's measurement windows: batches of requests submitted to one engine.

Each window is a batch of random-token prompts the profiler submits with
``LLM.generate`` (or steps itself, for mixed windows) and waits for; the scheduler's
step log and the worker probe record what the engine did, and
:mod:`nightjar.live.profiling.build` matches steps to windows by time. On the engine
with the draft, the window's first request opens a run with the window's policy
(:mod:`nightjar.live.run_switch`): a gamma cycle for decode windows (every gamma,
interleaved step by step over the same batch), ``fixed:0`` for prefill windows (one
draft pass over the prompt), ``fixed:G`` for the acceptance window.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nightjar.errors import NightjarInputError
from nightjar.live.profiling import ladder
from nightjar.live.profiling.build import Window
from nightjar.live.run_switch import RunStart

# Mixed windows: decoding requests start from prompts of this many tokens (their
# context matters to the decode part only, which the window's own pure decode steps
# measure) and decode this many tokens at most before they are aborted.
MIXED_DECODE_PROMPT = 32
MIXED_DECODE_TOKENS = 256
# Pure decode steps run before each batch of prompts arrives (the window's reference).
MIXED_REFERENCE_STEPS = 3


@dataclass
class Engine:
    """One started engine: ``vllm.LLM``, its step log, whether it has the draft."""

    label: str
    llm: Any
    log: Path
    drafted: bool
    seed: int
    vocab: int

    def params(self, n: int, max_tokens: int | list[int], policy: str | None) -> list[Any]:
        """Sampling parameters for ``n`` prompts (``max_tokens`` one for all or one
        each); the first opens a run of ``policy`` (on the draft engine only: the
        no-draft engine only ever runs ``nospec``)."""
        from vllm import SamplingParams

        caps = max_tokens if isinstance(max_tokens, list) else [max_tokens] * n
        out = []
        for i in range(n):
            extra = (RunStart(policy, str(self.log), self.seed).extra_args()
                     if i == 0 and policy is not None and self.drafted else None)
            out.append(SamplingParams(temperature=0.0, max_tokens=caps[i], ignore_eos=True,
                                      extra_args=extra))
        return out

    def prompts(self, n: int, length: int, rng: np.random.Generator) -> list[Any]:
        from vllm.inputs import TokensPrompt

        ids = rng.integers(3, max(4, self.vocab), size=(n, length))
        return [TokensPrompt(prompt_token_ids=[int(t) for t in row]) for row in ids]

    def generate(self, prompts: list[Any], max_tokens: int | list[int], policy: str | None
                 ) -> tuple[float, float, tuple[str, ...]]:
        params = self.params(len(prompts), max_tokens, policy)
        start = time.monotonic()
        outs = self.llm.generate(prompts, params, use_tqdm=False)
        return start, time.monotonic(), tuple(str(o.request_id) for o in outs)


def decode_window(engine: Engine, rungs: tuple[int, ...], c: int, output: int,
                  policy: str | None, rng: np.random.Generator) -> Window:
    """B prompts of ``c - output/2`` tokens decode ``output`` tokens: mean context c.
    With more than one rung, a ladder (:mod:`nightjar.live.profiling.ladder`): each
    rung's batch decodes ``output`` tokens at mean context c."""
    shapes = ladder.requests(rungs, c, output)
    prompts = [engine.prompts(1, p, rng)[0] for p, _ in shapes]
    start, end, ids = engine.generate(prompts, [n for _, n in shapes], policy)
    return Window("decode", rungs[0], c, start, end, ids, rungs=rungs if len(rungs) > 1 else ())


def prefill_window(engine: Engine, lengths: list[int], policy: str | None,
                   rng: np.random.Generator) -> Window:
    """One step prefilling prompts of ``lengths`` tokens (``sum(lengths)`` in all)."""
    prompts = [engine.prompts(1, k, rng)[0] for k in lengths]
    start, end, ids = engine.generate(prompts, 1, policy)
    return Window("prefill", len(lengths), sum(lengths), start, end, ids)


def accept_window(engine: Engine, prompts: list[Any], output: int, policy: str) -> Window:
    start, end, ids = engine.generate(prompts, output, policy)
    return Window("accept", len(prompts), 0, start, end, ids)


class _Tally:
    """Steps an engine, counting each request's tokens and which have finished."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self.tokens: dict[str, int] = {}
        self.done: set[str] = set()

    def least(self, ids: list[str]) -> int:
        return min(self.tokens.get(r, 0) for r in ids)

    def until(self, ok: Callable[[], bool]) -> None:
        while not ok():
            if not self.engine.has_unfinished_requests():
                raise NightjarInputError("measured profile: a mixed window ran out of requests")
            for out in self.engine.step():
                self.tokens[out.request_id] = len(out.outputs[0].token_ids) if out.outputs else 0
                if out.finished:
                    self.done.add(out.request_id)


def mixed_windows(engine: Engine, b: int, tokens: tuple[int, ...],
                  prompt_lengths: Callable[[int], list[int]], rng: np.random.Generator,
                  tag: str, tick: Callable[[], None]) -> list[Window]:
    """B requests decode (no draft engine); for each n, prompts of n tokens arrive while
    they do, so one step runs both, as vLLM V1 serves a prompt under load."""
    from vllm import SamplingParams

    llm_engine = engine.llm.llm_engine
    long = SamplingParams(temperature=0.0, max_tokens=MIXED_DECODE_TOKENS, ignore_eos=True)
    one = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
    windows: list[Window] = []
    dec = [f"{tag}-d{i}" for i in range(b)]
    tally = _Tally(llm_engine)
    for rid, prompt in zip(dec, engine.prompts(b, MIXED_DECODE_PROMPT, rng), strict=True):
        llm_engine.add_request(rid, prompt, long)
    for n in tokens:
        start = time.monotonic()
        floor = tally.least(dec) + MIXED_REFERENCE_STEPS
        tally.until(lambda: tally.least(dec) >= floor)  # noqa: B023 (called at once)
        lengths = prompt_lengths(n)
        ids = [f"{tag}-{n}-p{j}" for j in range(len(lengths))]
        for rid, k in zip(ids, lengths, strict=True):
            llm_engine.add_request(rid, engine.prompts(1, k, rng)[0], one)
        tally.until(lambda: tally.done.issuperset(ids))  # noqa: B023 (called at once)
        windows.append(Window("mixed", b, n, start, time.monotonic(), tuple(ids)))
        tick()
    llm_engine.abort_request(dec)
    while llm_engine.has_unfinished_requests():
        llm_engine.step()
    return windows
