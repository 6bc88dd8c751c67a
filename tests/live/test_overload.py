"""``nightjar+`` against no speculation inside vLLM: a prefill-heavy overload and low load.

Issue 15: on a prefill-heavy overload ``nightjar+`` lost to no speculation. Here
one engine without a draft (``nospec``) and one with the design guide's pair under
``nightjar+`` with ``--draft-kv skip`` (no step-time table: it learns what it needs
online) each serve, twice, (1) 24 prompts of 200 tokens at once, 24 output tokens
each (4800 prompt tokens: chunked prefill mixed with the first decodes, then 24
requests decode together) and (2) one request alone, 64 tokens, each phase twice
per engine. At low load speculation wins by ~2x, which wall time shows on any machine.

Whether speculation loses at B = 24 is a property of the machine at the time, not of
Nightjar: on a quiet machine it did (issue 15: nightjar+ then lost, 12.7 s against
10.9 s, because the step admitting 20 prompts was priced at B = 1 and, learning
online, it never measured K = 0 at B = 24), while two busy processes beside the
engine once made gamma 3 cost 16 ms per token at B = 24 against gamma 0's 29 ms, and
once 19.9 ms against 18.1 ms. The overload's wall time then rests on the draft's
prefill of the 4800 prompt tokens against what speculation saves, which the repeats
cannot settle on a busy machine. So the test reads the trade-off from the step logs
and asserts what the engine did: ``nightjar+`` measured gamma 0 at the full batch, and
where its own steps there show one side clearly winning (by more than :data:`CLEAR`),
the second overload, met with the first one's history, mostly chose that side. The
premise is the policy's own gamma-0 steps against its own speculating ones, taken in
the same run as its choices: the ``nospec`` engine's steps ran a minute apart, and on
a 2-core machine that alone moved the comparison by 25% (CI, issue 36's round: the
second overload speculated on all of its 10 steps while ``nospec``'s steps, a minute
earlier, were 25% cheaper per token); they are printed, not judged.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pytest

from nightjar.core.records import StepRecord
from nightjar.live.bench.limits import MAX_FOREIGN_PCT
from nightjar.live.engine_spec import EngineSpec
from nightjar.live.load import LoadMeter, LoadRecord
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

BASE = dict(max_model_len=512, max_num_seqs=64, kv_cache_bytes=512 << 20)
OVERLOAD = (24, 200, 24)  # requests, prompt tokens, output tokens
LOW = (1, 16, 64)
REPEATS = 2
FULL = 20  # decode batch from which a step counts as the overload's
# Per-token costs closer than this (relative) are a tie on a busy machine: two runs of
# one policy differed by up to 10% under load.
CLEAR = 0.15


def _timed(
    llm: Any, run_greedy: Any, phase: tuple[int, int, int], seed: int
) -> tuple[float, float]:
    """Runs one phase; returns its start and end (``time.monotonic``, the step log's clock)."""
    n, prompt, out = phase
    rng = random.Random(seed)
    prompts = [[rng.randrange(3, 8192) for _ in range(prompt)] for _ in range(n)]
    start = time.monotonic()
    run_greedy(llm, prompts, [out] * n)
    return start, time.monotonic()


def _serve(
    make_llm: Any, run_greedy: Any, spec: EngineSpec
) -> tuple[dict[str, list[tuple[float, float]]], LoadRecord]:
    spans: dict[str, list[tuple[float, float]]] = {"overload": [], "low": []}
    # The meter leaves before the engine shuts down (its exiting workers would read
    # as foreign load).
    with make_llm(spec) as llm, LoadMeter() as meter:
        run_greedy(llm, [[5, 6, 7]], [8])  # warm-up
        for r in range(REPEATS):
            # The overload first: the policy meets it before any low-load history.
            spans["overload"].append(_timed(llm, run_greedy, OVERLOAD, r))
            spans["low"].append(_timed(llm, run_greedy, LOW, 100 + r))
    return spans, meter.record


def _full_steps(log: Path, span: tuple[float, float]) -> list[StepRecord]:
    """Decode steps of the overload's full batch inside ``span``, without prompt work."""
    return [
        s for s in read_log(log).steps
        if span[0] < s.time_s < span[1] and s.batch_size >= FULL and not s.prefill_tokens
    ]


def _per_token_s(steps: list[StepRecord]) -> float | None:
    emitted = sum(s.emitted for s in steps)
    return sum(s.step_time_s for s in steps) / emitted if len(steps) >= 3 and emitted else None


@pytest.mark.slow
@pytest.mark.alone
def test_nightjar_plus_follows_the_overloads_trade_off_and_beats_nospec_at_low_load(
    tiny_big: Any, make_llm: Any, run_greedy: Any, tmp_path: Path
) -> None:
    target, draft = str(tiny_big.target), str(tiny_big.draft)
    off_log, our_log = tmp_path / "nospec.jsonl", tmp_path / "plus.jsonl"
    off = LiveSettings(policy="nospec", gamma_max=0, step_log=str(off_log))
    # skip: a K = 0 step runs no draft at all. In sync mode (vLLM's own) the draft
    # prefills every prompt chunk and runs on every K = 0 step whatever the policy
    # chooses, which alone made a prefill-heavy overload ~40% dearer per prompt token
    # (docs/live.md): no choice of K can then match an engine without a draft.
    ours = LiveSettings(policy="nightjar+", gamma_max=3, draft_kv="skip", step_log=str(our_log))
    off_spans, off_load = _serve(make_llm, run_greedy, EngineSpec(target, None, off, **BASE))
    our_spans, our_load = _serve(make_llm, run_greedy, EngineSpec(target, draft, ours, **BASE))
    nospec = {k: [b - a for a, b in v] for k, v in off_spans.items()}
    plus = {k: [b - a for a, b in v] for k, v in our_spans.items()}
    print(f"seconds, nospec: {nospec}; nightjar+: {plus}")
    # Two engines timed minutes apart are compared: only on a quiet machine (issue 40:
    # beside two CPU-bound processes nightjar+'s low-load seconds read 29.9 against
    # nospec's 25.1). Otherwise the premise is missing: skip, with the figures.
    loud = [r for r in (off_load, our_load) if r.available and r.foreign_pct > MAX_FOREIGN_PCT]
    if loud:
        pytest.skip(f"the machine was not quiet ({loud[0].summary}); seconds, nospec: "
                    f"{nospec}; nightjar+: {plus}")
    # At low load, speculation pays: better than nospec on average over the repeats
    # (one repeat each can swap on a loaded machine: 1.48/2.89 s against 2.55/3.15 s).
    assert sum(plus["low"]) < sum(nospec["low"])

    # The trade-off over both overloads: per output token at B >= FULL, no speculation
    # against nightjar+'s speculating steps.
    ours_full = [s for span in our_spans["overload"] for s in _full_steps(our_log, span)]
    off_cost = _per_token_s([s for sp in off_spans["overload"] for s in _full_steps(off_log, sp)])
    spec_cost = _per_token_s([s for s in ours_full if s.gamma > 0])
    second = _full_steps(our_log, our_spans["overload"][1])
    share = sum(1 for s in second if s.gamma > 0) / max(len(second), 1)
    print(
        f"s per token at B >= {FULL}: nospec {off_cost}, nightjar+ speculating {spec_cost}; "
        f"second overload: {len(second)} steps there, share speculating {share:.2f}"
    )
    # Issue 15: learning online, it never measured gamma 0 at the full batch.
    assert any(s.gamma == 0 for s in ours_full), "nightjar+ never measured gamma 0 at B >= 20"
    assert len(second) >= 3
    # The premise from nightjar+'s own steps at the full batch, in the same run as its
    # choices (the nospec engine's, a minute apart, are printed above, not judged).
    zero_cost = _per_token_s([s for s in ours_full if s.gamma == 0])
    print(f"nightjar+'s own gamma-0 steps at B >= {FULL}: {zero_cost} s per token")
    if zero_cost is None or spec_cost is None:
        return  # it never speculated at the full batch: nothing to weigh
    if spec_cost < zero_cost * (1.0 - CLEAR):
        assert share >= 0.5, "speculating won at the full batch, and nightjar+ mostly did not"
    elif spec_cost > zero_cost * (1.0 + CLEAR):
        assert share <= 0.5, "speculating lost at the full batch, and nightjar+ mostly did"
