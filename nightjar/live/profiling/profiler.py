"""The measured profiler: builds a profile's tables by running the real vLLM engine.

One engine per table column, each exactly what ``nightjar live`` runs, with Nightjar's
scheduler and worker plugged in:

- no draft at all (``nospec``): gamma 0 decode steps and the target's prefill;
- the draft engine with ``fixed:0`` and the draft's KV kept in sync (vLLM's K = 0
  runs one draft pass over the new tokens): the draft-forward table and the draft's
  prefill;
- the draft engine with ``fixed:G`` for each G >= 1: gamma-G decode steps and acceptance.

An engine per gamma (rather than switching the policy inside one engine) keeps every
measurement a plain, reproducible ``nightjar live --policy fixed:G`` configuration,
and each draft engine is started with ``num_speculative_tokens`` = the largest gamma,
as a live run with an adaptive policy is. Engines run as ``nightjar live`` runs them,
with the engine core in its own process; ``in_process`` (a quick mode for tests) starts
them in ~4 s instead of ~20 s, but its steps are faster than a live run's. Step times
come from the scheduler's step log (schedule start to output), split times from the
worker probe (``probe``); aggregation is in ``build``.
Call :func:`nightjar.live.plugins.engine.prepare_env` first.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shlex
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from nightjar.core.drafter import DRAFT_MODEL
from nightjar.errors import NightjarInputError
from nightjar.live.plugins.engine import EngineSpec, engine_kwargs
from nightjar.live.profiling.build import (
    EngineRun,
    Grid,
    Window,
    acceptance,
    decode_counts,
    decode_rows,
    memory_facts,
    mixed_cells,
    mixed_rows,
    mixed_rows_rebased,
    prefill_rows,
)
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

PROBE = "nightjar.live.profiling.probe.ProfileProbe"
Progress = Callable[[str], None]
# (engine label, windows measured, windows in all) after each measured window.
Tick = Callable[[str, int, int], None]


# Prompt length of the measured prefill steps: a typical prompt, not the longest
# context (a long prompt's attention would make every prefill step look dear).
PREFILL_PROMPT = 512


@dataclass(frozen=True, slots=True)
class ProfilePlan:
    target: str  # local directories
    draft: str | None  # the drafter's checkpoint; None for mtp, ngram, suffix
    target_name: str  # names stored in the profile
    draft_name: str
    # Up to `nightjar live`'s max_num_seqs, and contexts from short chat turns (32) to
    # 512 (every decode point prefills B prompts of its context first, so 1024 at
    # B = 64 alone would add minutes): a lookup outside is priced at the edge.
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    gammas: tuple[int, ...] = (0, 1, 2, 3)
    contexts: tuple[int, ...] = (32, 512)
    # The simulator prices prefill steps up to its token budget (8192) and a reload's
    # draft rebuild at 4096 tokens
    # (and a draft catch-up can be a single token), so the defaults run from 1 to 8192.
    # 2048 is `nightjar live`'s token budget, the largest step a live run prefills:
    # the curve is convex (ms per token: 1.8 at 256, 2.2 at 1024, 3.1 at 4096 on this
    # CPU), so a line from 1024 to 4096 overprices a 2048-token step by ~25% (issue 15).
    prefill_lengths: tuple[int, ...] = (1, 16, 64, 256, 1024, 2048, 4096, 8192)
    # Mixed steps (no-draft engine): B requests decode while prompts of n tokens arrive,
    # so one step runs both, as vLLM V1 serves a prompt under load. n stays within
    # `nightjar live`'s token budget (2048) with the B decodes; B leaves room in
    # max_num_seqs for the prompts; 64 because a short prompt costs more per token than
    # a line from (0, 0) to 256 says (issue 15: -18% to -42% on a decode-heavy trace).
    # Empty: not measured.
    mixed_batch_sizes: tuple[int, ...] = (1, 8, 32, 56)
    mixed_tokens: tuple[int, ...] = (64, 256, 1024, 1984)
    # Only the no-draft engine's mixed windows (topping up an existing profile).
    only_mixed: bool = False
    output_tokens: int = 32
    repeats: int = 2
    kv_cache_bytes: int = 1 << 30
    vocab: int = 32000
    seed: int = 0
    prompts: tuple[str, ...] = ()  # texts for acceptance; empty: the timing prompts
    workload: str = "synthetic"
    command: str = ""
    model_max_len: int = 2048  # the models' max_position_embeddings
    # False: the engine core is a separate process, as `nightjar live` runs it (the
    # steps then cost what a live run's do). True: in this process, ~5x faster to
    # start, but its steps measured up to ~40% faster than a live run's on 2 cores.
    in_process: bool = False
    # vLLM's speculative method (nightjar.core.drafter) and its other config keys.
    method: str = DRAFT_MODEL
    spec_options: tuple[tuple[str, Any], ...] = ()

    @property
    def gamma_max(self) -> int:
        return self.gammas[-1]

    @property
    def max_model_len(self) -> int:
        decode = max(self.contexts) + self.output_tokens // 2 + self.gamma_max + 2
        return max(decode, min(max(self.prefill_lengths) + 2, self.model_max_len))

    @property
    def token_budget(self) -> int:
        """max_num_batched_tokens: a measured prefill of n tokens must fit one step."""
        return max(max(self.prefill_lengths), 2048)

    def prefill_prompts(self, n: int) -> list[int]:
        """Prompt lengths that make one prefill step of ``n`` tokens: a long n is split
        over prompts of about the largest context (longer only where the largest batch
        size would not hold them), as a burst of arrivals is; one 2k-token prompt would
        charge every prefill step its long attention."""
        longest = max(min(max(self.contexts), PREFILL_PROMPT), -(-n // max(self.batch_sizes)))
        cap = min(self.max_model_len - 2, longest)
        return [cap] * (n // cap) + ([n % cap] if n % cap else [])

    def check(self) -> None:
        """Grid rules the profile format and the engines impose; one-line errors."""
        if list(self.gammas) != list(range(len(self.gammas))) or self.gamma_max < 1:
            raise NightjarInputError(f"--gammas must be 0,1,..,G with G >= 1, got {self.gammas}")
        for flag, values in (
            ("--batch-sizes", self.batch_sizes),
            ("--contexts", self.contexts),
            ("--prefill-lengths", self.prefill_lengths),
        ):
            if not values or min(values) < 1 or len(set(values)) != len(values):
                raise NightjarInputError(f"{flag} must be distinct integers >= 1, got {values}")
        if self.output_tokens < 4 or self.repeats < 1:
            raise NightjarInputError("--output-tokens must be >= 4 and --repeats >= 1")
        short = min(self.contexts) - self.output_tokens // 2
        if short < 1:
            raise NightjarInputError(
                f"context {min(self.contexts)} is too short for {self.output_tokens} output "
                "tokens (prompts are context - output/2 long): lower --output-tokens"
            )
        if self.max_model_len > self.model_max_len:
            raise NightjarInputError(
                f"the grid needs {self.max_model_len} tokens per sequence but the model "
                f"supports {self.model_max_len}: lower --contexts"
            )
        for b in self.mixed_batch_sizes:
            for n in self.mixed_tokens:
                if b < 1 or n < 1 or b + len(self.prefill_prompts(n)) > max(self.batch_sizes):
                    raise NightjarInputError(
                        f"a mixed step of {b} decodes and {n} prompt tokens needs more than "
                        f"the largest batch size {max(self.batch_sizes)} sequences: lower "
                        "--mixed-batch-sizes or --mixed-tokens"
                    )
        if self.mixed_tokens and max(self.mixed_tokens) + max(self.mixed_batch_sizes or (0,)) > (
            self.token_budget
        ):
            raise NightjarInputError("--mixed-tokens plus the decodes must fit the token budget")
        most = max(len(self.prefill_prompts(n)) for n in self.prefill_lengths)
        if most > max(self.batch_sizes):
            raise NightjarInputError(
                f"a prefill of {max(self.prefill_lengths)} tokens needs {most} prompts of at "
                f"most {self.max_model_len - 2} tokens, more than the largest batch size "
                f"{max(self.batch_sizes)}: lower --prefill-lengths"
            )


@contextlib.contextmanager
def in_process_engine(enabled: bool = True) -> Iterator[None]:
    """Run the engine core in this process, and undo what that leaves behind.

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


def _settings(plan: ProfilePlan, gamma: int | None, log: Path) -> LiveSettings:
    policy = "nospec" if gamma is None else f"fixed:{gamma}"
    return LiveSettings(
        policy=policy,
        gamma_max=0 if gamma is None else plan.gamma_max,
        seed=plan.seed,
        step_log=str(log),
        draft_kv="sync",
    )


def _generate(llm: Any, prompts: list[Any], max_tokens: int) -> tuple[float, float, list[str]]:
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    start = time.monotonic()
    outs = llm.generate(prompts, params, use_tqdm=False)
    return start, time.monotonic(), [str(o.request_id) for o in outs]


def _token_prompts(plan: ProfilePlan, n: int, length: int, rng: np.random.Generator) -> list[Any]:
    from vllm.inputs import TokensPrompt

    ids = rng.integers(3, max(4, plan.vocab), size=(n, length))
    return [TokensPrompt(prompt_token_ids=[int(t) for t in row]) for row in ids]


def window_count(plan: ProfilePlan, gamma: int | None) -> int:
    """How many measured windows :func:`_measure` runs for this engine."""
    mixed = len(plan.mixed_batch_sizes) * len(plan.mixed_tokens) if gamma is None else 0
    if plan.only_mixed:
        return plan.repeats * mixed
    per_repeat = len(plan.contexts) * len(plan.batch_sizes) + mixed
    if gamma is None or gamma == 0:
        per_repeat += len(plan.prefill_lengths)
    return plan.repeats * per_repeat + (1 if plan.prompts and gamma else 0)


# Mixed windows: decoding requests start from prompts of this many tokens (their
# context matters to the decode part only, which the window's own pure decode steps
# measure) and decode this many tokens at most before they are aborted.
MIXED_DECODE_PROMPT = 32
MIXED_DECODE_TOKENS = 256
# Pure decode steps run before each batch of prompts arrives (the window's reference).
MIXED_REFERENCE_STEPS = 3


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


def _mixed_windows(
    llm: Any, plan: ProfilePlan, rng: np.random.Generator, tick: Callable[[int], None]
) -> list[Window]:
    """B requests decode; for each n, prompts of n tokens arrive while they do."""
    from vllm import SamplingParams

    engine = llm.llm_engine
    long = SamplingParams(temperature=0.0, max_tokens=MIXED_DECODE_TOKENS, ignore_eos=True)
    one = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
    windows: list[Window] = []
    for b in plan.mixed_batch_sizes:
        tag = f"mix{b}x{len(windows)}"
        dec = [f"{tag}-d{i}" for i in range(b)]
        tally = _Tally(engine)
        for rid, prompt in zip(dec, _token_prompts(plan, b, MIXED_DECODE_PROMPT, rng), strict=True):
            engine.add_request(rid, prompt, long)
        for n in plan.mixed_tokens:
            start = time.monotonic()
            floor = tally.least(dec) + MIXED_REFERENCE_STEPS
            tally.until(lambda: tally.least(dec) >= floor)  # noqa: B023 (called at once)
            lengths = plan.prefill_prompts(n)
            ids = [f"{tag}-{n}-p{j}" for j in range(len(lengths))]
            for rid, k in zip(ids, lengths, strict=True):
                engine.add_request(rid, _token_prompts(plan, 1, k, rng)[0], one)
            tally.until(lambda: tally.done.issuperset(ids))  # noqa: B023 (called at once)
            windows.append(Window("mixed", b, n, start, time.monotonic(), tuple(ids)))
            tick(len(windows))
        engine.abort_request(dec)
        while engine.has_unfinished_requests():
            engine.step()
    return windows


def _measure(
    llm: Any, plan: ProfilePlan, gamma: int | None, tick: Callable[[int], None]
) -> list[Window]:
    rng = np.random.default_rng(plan.seed)
    windows: list[Window] = []
    _generate(llm, _token_prompts(plan, 2, 8, rng), 8)  # warm-up
    llm.collective_rpc("nightjar_probe_start")
    half = plan.output_tokens // 2

    for _ in range(plan.repeats):
        if gamma is None and plan.mixed_tokens:
            base = len(windows)

            def mixed_tick(k: int, b0: int = base) -> None:
                tick(b0 + k)

            windows += _mixed_windows(llm, plan, rng, mixed_tick)
        if plan.only_mixed:
            continue
        for c in plan.contexts:
            for b in plan.batch_sizes:
                prompts = _token_prompts(plan, b, c - half, rng)
                start, end, ids = _generate(llm, prompts, plan.output_tokens)
                windows.append(Window("decode", b, c, start, end, tuple(ids)))
                tick(len(windows))
        if gamma is None or gamma == 0:
            for n in plan.prefill_lengths:
                lengths = plan.prefill_prompts(n)
                prompts = [_token_prompts(plan, 1, k, rng)[0] for k in lengths]
                start, end, ids = _generate(llm, prompts, 1)
                windows.append(Window("prefill", len(lengths), n, start, end, tuple(ids)))
                tick(len(windows))
    if plan.prompts and gamma:
        from vllm.inputs import TextPrompt

        texts = [TextPrompt(prompt=p) for p in plan.prompts]
        start, end, ids = _generate(llm, texts, plan.output_tokens)
        windows.append(Window("accept", len(texts), 0, start, end, tuple(ids)))
        tick(len(windows))
    return windows


def run_engine(
    plan: ProfilePlan, gamma: int | None, workdir: Path, tick: Callable[[int], None] | None = None
) -> EngineRun:
    """Start one engine, measure, shut it down; ``gamma`` None = no draft."""
    from vllm import LLM

    log = workdir / f"steps-{'nodraft' if gamma is None else gamma}.jsonl"
    log.unlink(missing_ok=True)
    spec = EngineSpec(
        plan.target,
        None if gamma is None else plan.draft,
        _settings(plan, gamma, log),
        max_model_len=plan.max_model_len,
        max_num_seqs=max(plan.batch_sizes),
        kv_cache_bytes=plan.kv_cache_bytes,
        spec_tokens=plan.gamma_max,
        method=plan.method,
        spec_options=dict(plan.spec_options),
        speculate=gamma is not None,
    )
    kwargs = engine_kwargs(spec)
    kwargs["worker_extension_cls"] = PROBE
    kwargs["max_num_batched_tokens"] = plan.token_budget
    with in_process_engine(plan.in_process):
        llm = LLM(**kwargs)
        try:
            windows = _measure(llm, plan, gamma, tick or (lambda _done: None))
            records = [
                (str(k), float(t), float(d))
                for k, t, d in llm.collective_rpc("nightjar_probe_take")[0]
            ]
            facts = dict(llm.collective_rpc("nightjar_probe_facts")[0])
        finally:
            llm.llm_engine.engine_core.shutdown()
            del llm
    contents = read_log(log)
    start: dict[str, Any] = next((e for e in contents.events if e.get("event") == "start"), {})
    preempted = sum(c["preemptions"] for c in contents.requests.values())
    if preempted:
        raise NightjarInputError(
            f"measured profile: {preempted} preemptions (KV pool too small for the grid); "
            "raise --kv-cache-gb or lower --batch-sizes / --contexts"
        )
    return EngineRun(
        gamma,
        contents.steps,
        records,
        windows,
        facts,
        int(start.get("pool_blocks", 0)),
        contents.requests,
    )


def measure_profile(
    plan: ProfilePlan, progress: Progress | None = None, tick: Tick | None = None
) -> dict[str, Any]:
    """Run every engine and return the profile JSON (format_version 1).

    ``progress`` gets a line per engine; ``tick`` is called after each measured window.
    """
    say = progress or (lambda _msg: None)
    runs: dict[int | None, EngineRun] = {}
    order: list[int | None] = [None, *plan.gammas]
    with tempfile.TemporaryDirectory(prefix="nightjar-profile-") as tmp:
        for g in order:
            label = "no draft" if g is None else f"fixed:{g}"
            name = f"engine {len(runs) + 1}/{len(order)}: {label}"
            total = window_count(plan, g)
            say(name)
            t = time.monotonic()
            on_window = (lambda done, n=name, k=total: tick(n, done, k)) if tick else None
            run = runs[g] = run_engine(plan, g, Path(tmp), on_window)
            run.wall_s, run.load_1m = time.monotonic() - t, os.getloadavg()[0]
            say(f"  {label}: {len(run.steps)} steps in {run.wall_s:.0f} s, load {run.load_1m:.1f}")
    return assemble(plan, runs)


def assemble(plan: ProfilePlan, runs: dict[int | None, EngineRun]) -> dict[str, Any]:
    from vllm import __version__ as vllm_version

    grid = Grid(plan.batch_sizes, plan.gammas, plan.contexts)
    decode, fwd = decode_rows(grid, runs)
    facts = runs[plan.gamma_max].facts
    with_d, without = runs[plan.gamma_max].pool_blocks, runs[None].pool_blocks
    memory = memory_facts(facts, with_d, without)
    acc = acceptance(list(runs.values()), "accept" if plan.prompts else "decode")
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
        "notes": "Measured with vLLM (nightjar.live.profiling.profiler): medians over every "
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
            "acceptance_requests": acc[2] if acc else 0,
            # [B, gamma, context, clean steps]: what each decode cell is the median of.
            "decode_steps": decode_counts(grid, runs),
            "engines": {
                ("no draft" if g is None else f"fixed:{g}"): {
                    "steps": len(r.steps),
                    "seconds": round(r.wall_s, 1),
                    "load_avg_1m": round(r.load_1m, 2),
                }
                for g, r in runs.items()
            },
            "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        },
        "memory": memory,
        "decode": decode,
        "draft_forward": fwd,
        "prefill": prefill_rows(runs),
        **_mixed_table(plan, runs[None]),
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
        run = run_engine(only, None, Path(tmp))
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
