"""``nightjar+`` against no speculation inside vLLM: a prefill-heavy overload and low load.

Issue 15: on a prefill-heavy overload ``nightjar+`` lost to no speculation. Here
one engine without a draft (``nospec``) and one with the design guide's pair under
``nightjar+`` with ``--draft-kv skip`` (no step-time table: it learns what it needs
online) each serve, twice, (1) 24 prompts of 200 tokens at once, 24 output tokens
each (4800 prompt tokens: chunked prefill mixed with the first decodes, then 24
requests decode together, where speculation loses on this CPU) and (2) one
request alone, 64 tokens. Wall times are noisy on a shared machine, so each phase
runs twice per engine and the comparison allows the spread the repeats show.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from nightjar.live.plugins.engine import EngineSpec
from nightjar.live.settings import LiveSettings

BASE = dict(max_model_len=512, max_num_seqs=64, kv_cache_bytes=512 << 20)
OVERLOAD = (24, 200, 24)  # requests, prompt tokens, output tokens
LOW = (1, 16, 64)
REPEATS = 2


def _timed(llm: Any, run_greedy: Any, phase: tuple[int, int, int], seed: int) -> float:
    n, prompt, out = phase
    rng = random.Random(seed)
    prompts = [[rng.randrange(3, 8192) for _ in range(prompt)] for _ in range(n)]
    start = time.perf_counter()
    run_greedy(llm, prompts, [out] * n)
    return time.perf_counter() - start


def _serve(make_llm: Any, run_greedy: Any, spec: EngineSpec) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"overload": [], "low": []}
    with make_llm(spec) as llm:
        run_greedy(llm, [[5, 6, 7]], [8])  # warm-up
        for r in range(REPEATS):
            # The overload first: the policy meets it before any low-load history.
            times["overload"].append(_timed(llm, run_greedy, OVERLOAD, r))
            times["low"].append(_timed(llm, run_greedy, LOW, 100 + r))
    return times


@pytest.mark.slow
def test_nightjar_plus_no_worse_than_nospec_under_overload_and_better_at_low_load(
    tiny_big: Any, make_llm: Any, run_greedy: Any
) -> None:
    target, draft = str(tiny_big.target), str(tiny_big.draft)
    off = LiveSettings(policy="nospec", gamma_max=0)
    # skip: a K = 0 step runs no draft at all. In sync mode (vLLM's own) the draft
    # prefills every prompt chunk and runs on every K = 0 step whatever the policy
    # chooses, which alone made a prefill-heavy overload ~40% dearer per prompt token
    # (docs/live.md): no choice of K can then match an engine without a draft.
    ours = LiveSettings(policy="nightjar+", gamma_max=3, draft_kv="skip")
    nospec = _serve(make_llm, run_greedy, EngineSpec(target, None, off, **BASE))
    plus = _serve(make_llm, run_greedy, EngineSpec(target, draft, ours, **BASE))
    print(f"seconds, nospec: {nospec}; nightjar+: {plus}")
    spread = max(max(v) - min(v) for t in (nospec, plus) for v in t.values())
    # At low load, speculation pays: better than nospec on average over the repeats
    # (one repeat each can swap on a loaded machine: 1.48/2.89 s against 2.55/3.15 s).
    assert sum(plus["low"]) < sum(nospec["low"])
    # Under overload: no worse than nospec beyond the run-to-run spread. Issue 15:
    # nightjar+ lost here (12.7 s against 10.9 s on a quiet machine) because the
    # step admitting 20 prompts was priced at B = 1 (K > 0, so the draft prefilled
    # them) and, learning online, it never measured K = 0 at B = 24.
    assert min(plus["overload"]) <= max(nospec["overload"]) + spread, (
        f"nightjar+ {plus['overload']} s vs nospec {nospec['overload']} s under overload "
        f"(spread {spread:.2f} s)"
    )
