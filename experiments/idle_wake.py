"""Is a step that follows an idle engine slower than the same step on a busy one? (issue 21)

In replays, prefill-only steps (a prompt arriving at an empty engine) ran 20-60%
slower than the measured profile prices them, on every trace, at low load too.
Such a step follows an idle gap; the profiler's prefill windows follow its other
windows at once. This submits one prompt (``--prompt`` tokens, one output token: a
prefill-only step) after idle gaps of several lengths, the gaps in rotated order
round by round, on one engine, and prints the step-log time per gap.
Run it alone on the machine.

    LD_PRELOAD=... .venv-live/bin/python experiments/idle_wake.py [--rounds 6] [--engine async]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from typing import Any

from tiny_engine import nospec_engine  # the sibling script in this folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--gaps", type=float, nargs="+", default=[0.0, 0.3, 1.0, 3.0])
    parser.add_argument("--engine", choices=("llm", "async"), default="llm",
                        help="vllm.LLM (the profiler's driver) or AsyncLLM (nightjar live's)")
    args = parser.parse_args()

    from nightjar.live.engine_spec import open_llm, prepare_env
    from nightjar.live.steplog import read_log

    prepare_env()
    import numpy as np
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    spec, log = nospec_engine("nj-idle-", 8)
    rng = np.random.default_rng(0)
    params = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
    marks: list[tuple[float, float]] = []  # (gap, submit time)

    def prompt() -> Any:
        return TokensPrompt(prompt_token_ids=[int(t) for t in rng.integers(3, 8192,
                                                                            size=args.prompt)])

    def rounds(one: Callable[[], float]) -> None:
        for _ in range(3):
            one()
        for r in range(args.rounds):
            k = r % len(args.gaps)
            for gap in args.gaps[k:] + args.gaps[:k]:
                if gap:
                    time.sleep(gap)
                else:
                    one()  # the engine has just run a step
                marks.append((gap, one()))

    if args.engine == "llm":
        with open_llm(spec) as llm:
            def one_llm() -> float:
                start = time.monotonic()
                llm.generate([prompt()], params, use_tqdm=False)
                return start

            rounds(one_llm)
    else:
        asyncio.run(_async_rounds(spec, prompt, params, rounds))
    steps = [s for s in read_log(str(log)).steps if s.prefill_tokens == args.prompt]
    per: dict[float, list[float]] = {}
    for gap, at in marks:
        hit = [s.step_time_s for s in steps if at <= s.time_s <= at + 5.0]
        if hit:
            per.setdefault(gap, []).append(hit[0])
    print(f"prefill-only step of {args.prompt} tokens after an idle gap ({args.rounds} rounds)")
    base = statistics.median(per[args.gaps[0]])
    for gap in args.gaps:
        ts = per[gap]
        print(f"gap {gap:4.1f} s: median {1e3 * statistics.median(ts):7.1f} ms "
              f"({statistics.median(ts) / base:5.3f}x), all "
              f"{[round(1e3 * t) for t in ts]}")


async def _async_rounds(spec: Any, prompt: Callable[[], Any], params: Any,
                        rounds: Callable[[Callable[[], float]], None]) -> None:
    """The same rounds on ``AsyncLLM`` (as ``nightjar live`` and its benchmark serve),
    each request awaited from this process's event loop."""
    from nightjar.live.replay import started

    async with started(spec) as engine:
        loop = asyncio.get_running_loop()
        count = iter(range(1 << 30))

        async def one_async() -> float:
            start = time.monotonic()
            async for _ in engine.generate(prompt(), params, request_id=f"w{next(count)}"):
                pass
            return start

        # The rounds sleep between requests; run them in a thread that hands each
        # request to this loop, so the loop (and AsyncLLM's output handler) stays free.
        def one() -> float:
            return asyncio.run_coroutine_threadsafe(one_async(), loop).result()

        await asyncio.to_thread(rounds, one)


if __name__ == "__main__":
    main()
