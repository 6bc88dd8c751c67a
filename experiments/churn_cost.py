"""Are decode steps slower while requests join and leave the batch? (issue 21)

In replays under load the measured profile priced pure decode steps 9-15% under the
engine's time, inside its grid, while the profiler's windows (a batch that starts
together and decodes together) agreed at low load. This compares, on one engine,
pure decode steps at the same batch size and context in two conditions, rotated
round by round:

- ``steady``: windows of B requests that start and finish together (the profiler's);
- ``churn``: B requests kept in flight, each replaced as soon as it finishes, so
  requests join and leave every few steps (a replay's).

Both use prompts of ``--prompt`` tokens and outputs drawn around ``--output`` tokens
(so that in ``churn`` the requests finish at different steps). Prints the median
pure-decode step time at batch sizes B-2..B, and the mean context, of each condition
per round. Run it alone on the machine.

    LD_PRELOAD=... .venv-live/bin/python experiments/churn_cost.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from tiny_engine import nospec_engine  # the sibling script in this folder


async def _request(engine: Any, rid: str, prompt: int, output: int, rng: Any) -> None:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    # Output lengths spread over output/3..5 output/3, so that requests kept in flight
    # finish at different steps (the same draw in both conditions).
    output = int(rng.integers(output // 3, 5 * output // 3 + 1))
    ids = [int(t) for t in rng.integers(3, 8192, size=prompt)]
    params = SamplingParams(temperature=0.0, max_tokens=output, ignore_eos=True)
    async for _ in engine.generate(TokensPrompt(prompt_token_ids=ids), params, request_id=rid):
        pass


async def _steady(engine: Any, b: int, prompt: int, output: int, windows: int, tag: str,
                  rng: Any) -> None:
    for w in range(windows):
        await asyncio.gather(*(_request(engine, f"{tag}-{w}-{i}", prompt, output, rng)
                               for i in range(b)))


async def _churn(engine: Any, b: int, prompt: int, output: int, total: int, tag: str,
                 rng: Any) -> None:
    count = 0

    async def lane(k: int) -> None:
        nonlocal count
        while count < total:
            count += 1
            await _request(engine, f"{tag}-{k}-{count}", prompt, output, rng)

    await asyncio.gather(*(lane(k) for k in range(b)))


async def _main(args: argparse.Namespace) -> None:
    import numpy as np
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    from nightjar.live.engine_spec import SHUTDOWN_GRACE_S, engine_kwargs
    from nightjar.live.steplog import read_log

    spec, log = nospec_engine("nj-churn-", args.batch)
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_kwargs(spec)))
    rng = np.random.default_rng(0)
    spans: list[tuple[int, str, float, float]] = []
    try:
        await _steady(engine, 4, args.prompt, 8, 1, "warm", rng)
        for r in range(args.rounds):
            modes = ("steady", "churn") if r % 2 == 0 else ("churn", "steady")
            for mode in modes:
                start = time.monotonic()
                if mode == "steady":
                    await _steady(engine, args.batch, args.prompt, args.output, args.windows,
                                  f"s{r}", rng)
                else:
                    await _churn(engine, args.batch, args.prompt, args.output,
                                 args.windows * args.batch, f"c{r}", rng)
                spans.append((r, mode, start, time.monotonic()))
                await asyncio.sleep(1.2)
    finally:
        engine.shutdown(timeout=SHUTDOWN_GRACE_S)
        del engine  # AsyncLLM.__del__ at interpreter exit would shut down again
    steps = read_log(str(log)).steps
    lo = args.batch - 2
    print(f"pure decode steps at B {lo}..{args.batch}, prompt {args.prompt}, output "
          f"{args.output}, {args.windows} windows' worth of requests per condition")
    print("round mode    steps  median ms  mean context")
    for r, mode, s, e in spans:
        sel = [st for st in steps if s <= st.time_s <= e and st.prefill_tokens == 0
               and lo <= st.batch_size <= args.batch]
        times = [st.step_time_s for st in sel]
        ctx = statistics.mean(st.mean_context_len for st in sel)
        print(f"{r:<5} {mode:<7} {len(sel):>5}  {1e3 * statistics.median(times):9.2f}  "
              f"{ctx:8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--prompt", type=int, default=48)
    parser.add_argument("--output", type=int, default=24)
    parser.add_argument("--windows", type=int, default=8)
    args = parser.parse_args()
    from nightjar.live.engine_spec import prepare_env

    prepare_env()
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
