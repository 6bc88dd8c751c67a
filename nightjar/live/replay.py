"""Replay a trace against vLLM's async engine with Nightjar plugged in.

Requests are submitted at the trace's arrival times (``nightjar live --rate-scale``
rescales the trace before it gets here), greedy, ``ignore_eos`` and ``max_tokens`` =
the trace's output length, so every policy does the same work. Prompts are the trace's token ids or
text where it has them, else deterministic pseudo-random token ids of the given
length. The result is a :class:`nightjar.core.records.RunResult` with the same columns
as the simulator's; step rows come from the scheduler's step log.
Call :func:`nightjar.live.engine_spec.prepare_env` before importing this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from nightjar.core.records import RequestRecord, RunResult
from nightjar.errors import NightjarInputError
from nightjar.live.binding import current_binding
from nightjar.live.engine_spec import SHUTDOWN_GRACE_S, EngineSpec, engine_kwargs
from nightjar.live.optout import NO_SPEC_KEY
from nightjar.live.run_switch import RunStart
from nightjar.live.startup import startup_cause
from nightjar.live.steplog import LogContents, read_log
from nightjar.trace.trace import Trace


@dataclass(frozen=True, slots=True)
class ReplayOptions:
    # Synthetic prompt ids are drawn from [3, vocab_size); None: the target's own
    # vocabulary (its config.json), which is what vLLM checks every id against.
    vocab_size: int | None = None
    seed: int = 0


# Seconds a run's reader waits for the engine core to finish writing its step log.
LOG_SETTLE_S = 10.0


def prompt_vocab(spec: EngineSpec, opts: ReplayOptions) -> int:
    """The ids a prompt may hold: the target's vocabulary, never more."""
    from nightjar.live.models import vocab_size

    target = vocab_size(spec.target) if Path(spec.target, "config.json").exists() else None
    given = opts.vocab_size
    if target is None:
        return given or 32000
    return min(given, target) if given else target


def synthetic_prompt(n: int, vocab: int, rng: np.random.Generator) -> list[int]:
    # Ids 0..2 are special (unk/bos/eos) in the tiny tokenizer and in most Llamas.
    return [int(x) for x in rng.integers(3, max(4, vocab), size=n)]


def _prompts(trace: Trace, spec: EngineSpec, opts: ReplayOptions) -> tuple[list[Any], int]:
    """Prompts (token ids or text) clipped so that prompt + output fits the model."""
    from vllm.inputs import TextPrompt, TokensPrompt

    rng = np.random.default_rng(opts.seed)
    vocab = prompt_vocab(spec, opts)
    out: list[Any] = []
    clipped = 0
    for i in range(len(trace)):
        room = spec.max_model_len - int(trace.output_tokens[i])
        n = int(trace.prompt_tokens[i])
        if n > room:
            n, clipped = max(1, room), clipped + 1
        given = trace.prompts[i] if trace.prompts is not None else None
        if isinstance(given, str):
            out.append(TextPrompt(prompt=given))
        elif isinstance(given, list):
            ids = [int(t) for t in given][:n]
            if ids and max(ids) >= vocab:
                raise NightjarInputError(
                    f"trace {trace.name}: request {i} has prompt token id {max(ids)}, beyond "
                    f"the target's vocabulary ({vocab} tokens, {spec.target})")
            out.append(TokensPrompt(prompt_token_ids=ids))
        else:
            out.append(TokensPrompt(prompt_token_ids=synthetic_prompt(n, vocab, rng)))
    return out, clipped


async def _one(
    engine: Any,
    i: int,
    prompt: Any,
    max_tokens: int,
    t0: float,
    at: float,
    rec: RequestRecord,
    outputs: list[list[int]],
    speculate: bool = True,
    opens: dict[str, Any] | None = None,
    opened: asyncio.Event | None = None,
) -> None:
    """One request at its arrival time. ``opens``: the run switch this request carries
    (it is then added before any other request of the run: ``opened`` is set once it is
    in the engine's queue, and every other request waits for that)."""
    from vllm import SamplingParams

    delay = t0 + at - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)
    extra = {**(opens or {}), **({} if speculate else {NO_SPEC_KEY: 1})}
    params = SamplingParams(
        temperature=0.0, max_tokens=max_tokens, ignore_eos=True, extra_args=extra or None,
    )
    if opened is not None and opens is None:
        await opened.wait()
    tokens: list[int] = []
    async for out in _outputs(engine, f"nj{i}", prompt, params, opened if opens else None):
        tokens = list(out.outputs[0].token_ids)
        if tokens and rec.first_token_s != rec.first_token_s:  # still NaN
            rec.first_token_s = time.monotonic() - t0
        rec.prompt_tokens = len(out.prompt_token_ids or []) or rec.prompt_tokens
    rec.finish_s = time.monotonic() - t0
    outputs[i] = tokens


async def _outputs(
    engine: Any, request_id: str, prompt: Any, params: Any, added: asyncio.Event | None
) -> AsyncIterator[Any]:
    """vLLM's ``generate``; with ``added``, set it once the request is in the engine's
    queue (``AsyncLLM.add_request`` has sent it), which ``generate`` does not tell."""
    if added is None:
        async for out in engine.generate(prompt, params, request_id=request_id):
            yield out
        return
    from vllm.outputs import STREAM_FINISHED

    queue = await engine.add_request(request_id, prompt, params)
    added.set()
    try:
        finished = False
        while not finished:
            out = queue.get_nowait() or await queue.get()
            finished = out.finished
            if out is not STREAM_FINISHED:
                yield out
    except asyncio.CancelledError:
        await engine.abort(queue.request_id, internal=True)
        raise


@contextlib.asynccontextmanager
async def started(spec: EngineSpec) -> AsyncIterator[Any]:
    """``async with started(spec) as engine:`` vLLM's ``AsyncLLM`` with Nightjar plugged
    in; a configuration the scheduler refuses is one line (``NightjarInputError``), and
    the engine is shut down with the grace its engine core needs."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    try:
        engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_kwargs(spec)))
    except RuntimeError as exc:
        cause = startup_cause(spec.settings.error_file)
        if cause is None:
            raise
        raise NightjarInputError(f"the engine cannot start: {cause}") from exc
    try:
        yield engine
    finally:
        # vLLM's default grace (5 s) can kill the engine core mid-teardown, which
        # leaks its shared-memory queues; it exits by itself well within this.
        engine.shutdown(timeout=SHUTDOWN_GRACE_S)
        # Drop it now: AsyncLLM.__del__ at interpreter exit would shut down again.
        del engine


async def serve_trace(
    engine: Any,
    trace: Trace,
    spec: EngineSpec,
    opts: ReplayOptions,
    progress: Callable[[int], None] | None = None,
    run: RunStart | None = None,
) -> tuple[RunResult, list[list[int]]]:
    """Replay ``trace`` on a started engine; ``run``: the run its first request opens
    (a policy switch on an engine shared by several runs, :mod:`nightjar.live.run_switch`),
    whose step log then holds this replay's steps."""
    prompts, clipped = _prompts(trace, spec, opts)
    n = len(trace)
    arrivals = trace.arrival_s
    records = [
        RequestRecord(
            i, float(arrivals[i]), int(trace.prompt_tokens[i]), int(trace.output_tokens[i])
        )
        for i in range(n)
    ]
    outputs: list[list[int]] = [[] for _ in range(n)]
    first = int(np.argmin(arrivals)) if n else 0
    opened = asyncio.Event() if run is not None else None
    t0 = time.monotonic()
    tasks = [
        asyncio.create_task(
            _one(
                engine,
                i,
                prompts[i],
                int(trace.output_tokens[i]),
                t0,
                float(arrivals[i]),
                records[i],
                outputs,
                trace.speculate is None or bool(trace.speculate[i]),
                run.extra_args() if run is not None and i == first else None,
                opened,
            )
        )
        for i in range(n)
    ]
    pending = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, timeout=0.5)
            for task in done:
                task.result()  # re-raise a request's failure here
            if progress is not None:
                progress(n - len(pending))
    finally:
        for task in pending:
            task.cancel()
    duration = time.monotonic() - t0
    if run is not None:
        spec = replace(spec, settings=replace(spec.settings, policy=run.policy,
                                              step_log=run.step_log, seed=run.seed))
    result = RunResult(
        policy=spec.settings.policy,
        engine="live",
        trace=trace.name,
        profile=Path(spec.target).name,
        seed=opts.seed,
        duration_s=duration,
        requests=records,
        extra={"clipped_prompts": float(clipped), **current_binding().extras()},
    )
    if spec.settings.step_log is not None:
        ids = {f"nj{rec.request_id}" for rec in records}
        log = await _settled_log(spec.settings.step_log, t0, ids)
        _attach_log(result, log)
    return result, outputs


async def _replay(
    trace: Trace, spec: EngineSpec, opts: ReplayOptions, progress: Callable[[int], None] | None
) -> tuple[RunResult, list[list[int]]]:
    async with started(spec) as engine:
        return await serve_trace(engine, trace, spec, opts, progress)


async def _settled_log(path: str, t0: float, ids: set[str]) -> LogContents:
    """The log once it holds every request in ``ids`` and the idle summary after them.

    The engine core, another process than the client that just got the last token,
    writes a request's record as it frees the request and a summary when it goes idle:
    a read at once can miss both (the requests' draft counts would read zero, the
    summary would be an earlier one's). After ``LOG_SETTLE_S`` it is read as it is.
    """
    deadline = time.monotonic() + LOG_SETTLE_S
    while True:
        log = read_log(path, t0)
        logged = {rid.split("-")[0] for rid in log.requests}
        if (log.idle and ids <= logged) or time.monotonic() > deadline:
            return log
        await asyncio.sleep(0.05)


def _attach_log(result: RunResult, log: LogContents) -> None:
    # Drop the idle steps before the first arrival and empty scheduler ticks.
    result.steps = [s for s in log.steps if s.batch_size or s.prefill_tokens]
    for rec in result.requests:
        counts = next(
            (c for rid, c in log.requests.items() if rid.split("-")[0] == f"nj{rec.request_id}"),
            None,
        )
        if counts is not None:
            rec.drafted, rec.accepted = counts["drafted"], counts["accepted"]
            rec.preemptions = counts["preemptions"]
            rec.acceptance = rec.accepted / rec.drafted if rec.drafted else float("nan")
    result.extra.update(log.summary)
    result.extra["residency_events"] = float(
        sum(1 for e in log.events if str(e.get("event", "")).endswith("_done"))
    )


def replay(
    trace: Trace,
    spec: EngineSpec,
    opts: ReplayOptions = ReplayOptions(),
    progress: Callable[[int], None] | None = None,
) -> tuple[RunResult, list[list[int]]]:
    """Run one policy over ``trace``; returns the records and each request's output ids.

    ``progress`` is called with the number of finished requests, about twice a second.
    """
    step_log = spec.settings.step_log
    if step_log is None:
        step_log = str(Path(tempfile.mkdtemp(prefix="nightjar-live-")) / "steps.jsonl")
        spec = replace(spec, settings=replace(spec.settings, step_log=step_log))
    if spec.settings.error_file is None:
        error_file = Path(step_log).with_suffix(".startup-error")
        error_file.unlink(missing_ok=True)
        spec = replace(spec, settings=replace(spec.settings, error_file=str(error_file)))
    return asyncio.run(_replay(trace, spec, opts, progress))
