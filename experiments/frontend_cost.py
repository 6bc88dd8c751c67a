"""Does the front end's per-token work slow the engine's steps? (issue 21)

The measured profiler submits its windows with ``LLM.generate``, which asks vLLM for
each request's final output only; ``nightjar live`` and ``nightjar bench live`` stream
every request's output through ``AsyncLLM`` (a ``RequestOutput`` per request per step,
built and detokenized in the front-end process). On a 2-core machine the front end
shares the cores with the model's OpenMP threads, so its work may land inside the
engine's steps. This runs the same decode windows (B requests of equal prompt, all
arriving at once) on one ``AsyncLLM`` engine in three ways, rotated round by round:

- ``stream``: every output streamed, as the replay consumes it;
- ``stream-ids``: streamed without detokenization;
- ``final``: the final output only (detokenized), as the profiler's ``LLM.generate`` asks.

and prints each way's median pure-decode step time (the scheduler's step log) per
batch size, with its ratio to ``final``. Run it alone on the machine.

    LD_PRELOAD=... .venv-live/bin/python experiments/frontend_cost.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from tiny_engine import nospec_engine  # the sibling script in this folder

MODES = ("stream", "stream-ids", "final")


async def _window(engine: Any, mode: str, b: int, prompt: int, output: int, tag: str,
                  vocab: int) -> tuple[float, float]:
    import numpy as np
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt
    from vllm.sampling_params import RequestOutputKind

    rng = np.random.default_rng(b)
    kind = RequestOutputKind.FINAL_ONLY if mode == "final" else RequestOutputKind.CUMULATIVE
    params = SamplingParams(temperature=0.0, max_tokens=output, ignore_eos=True,
                            output_kind=kind, detokenize=mode != "stream-ids")

    async def one(i: int) -> None:
        ids = [int(t) for t in rng.integers(3, vocab, size=prompt)]
        tokens: list[int] = []
        async for out in engine.generate(TokensPrompt(prompt_token_ids=ids), params,
                                         request_id=f"{tag}-{i}"):
            tokens = list(out.outputs[0].token_ids)
        assert len(tokens) == output

    start = time.monotonic()
    await asyncio.gather(*(one(i) for i in range(b)))
    return start, time.monotonic()


async def _main(args: argparse.Namespace) -> None:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    from nightjar.live.engine_spec import SHUTDOWN_GRACE_S, engine_kwargs
    from nightjar.live.steplog import read_log

    spec, log = nospec_engine("nj-frontend-", max(args.batch))
    engine = AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_kwargs(spec)))
    windows: list[tuple[str, int, float, float]] = []
    try:
        await _window(engine, "final", 4, args.prompt, 8, "warm", 8192)
        for r in range(args.rounds):
            order = MODES[r % 3:] + MODES[:r % 3]
            for mode in order:
                for b in args.batch:
                    s, e = await _window(engine, mode, b, args.prompt, args.output,
                                         f"r{r}{mode}{b}", 8192)
                    windows.append((mode, b, s, e))
                    await asyncio.sleep(1.2)  # the idle core's spin ends
    finally:
        engine.shutdown(timeout=SHUTDOWN_GRACE_S)
    steps = read_log(str(log), 0.0).steps
    per: dict[tuple[str, int], list[float]] = {}
    for mode, b, s, e in windows:
        times = [st.step_time_s for st in steps
                 if s <= st.time_s <= e and st.batch_size == b and st.prefill_tokens == 0]
        per.setdefault((mode, b), []).extend(times)
    print(f"decode steps, prompt {args.prompt}, output {args.output}, {args.rounds} rounds")
    print("B    mode         steps  median ms  vs final")
    for b in args.batch:
        base = statistics.median(per[("final", b)])
        for mode in MODES:
            ts = per[(mode, b)]
            med = statistics.median(ts)
            print(f"{b:<4} {mode:<12} {len(ts):>5}  {1e3 * med:9.2f}  {med / base:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch", type=int, nargs="+", default=[8, 32, 64])
    parser.add_argument("--prompt", type=int, default=48)
    parser.add_argument("--output", type=int, default=32)
    args = parser.parse_args()
    from nightjar.live.engine_spec import prepare_env

    prepare_env()
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
