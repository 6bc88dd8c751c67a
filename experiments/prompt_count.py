"""Does a step cost more when its prompt tokens come as more prompts? (issue 15)

    LD_PRELOAD=$(find .venv-live -name libiomp5.so) VLLM_ENABLE_V1_MULTIPROCESSING=0 \\
        .venv-live/bin/python experiments/prompt_count.py [--models DIR] [--draft] [--repeats 4]

The simulator prices a step's prompt tokens by their number only (``nightjar/sim/price.py``).
Short prompts in live runs looked 18-42% too cheap, which a per-request CPU cost
(one more request to set up, sample and, with a draft, propose for) would explain.
This measures it directly, at fixed prompt tokens: B requests decode (32-token
prompts); after 3 pure decode steps, ``n`` prompt tokens arrive as ``k`` prompts of
``n / k`` tokens (``k`` = 1, 2, 4, 8), all admitted into one mixed step. The step's
added time is the mixed step minus the median of the 3 decode steps before it (its
own time base). Cells run in a shuffled order in every repeat.

The per-prompt cost is the slope ``(added(k=8) - added(k=1)) / 7`` at each ``n`` and
repeat, with a 95% interval over them (``nightjar.results.stats``). ``--draft`` runs the
draft engine at K = 3 (``fixed:3``) instead of the no-draft one. The new prompts ask
for ``--prompt-output`` tokens, so they keep decoding (and, with the draft, get
drafts) after the step, as in a served trace. Step times are ``engine.step()`` wall
times with the engine core in this process. Noisy on a shared CPU: look at the load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from nightjar.results.stats import mean_interval

TOKENS = (64, 256)
PROMPTS = (1, 2, 4, 8)
REFERENCE_STEPS = 3


def measure(
    models: Path, draft: bool, batch: int, repeats: int, prompt_output: int
) -> list[dict[str, Any]]:
    from nightjar.live.engine_spec import EngineSpec, engine_kwargs, prepare_env
    from nightjar.live.settings import LiveSettings

    prepare_env()
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    spec = EngineSpec(
        str(models / "target"),
        str(models / "draft") if draft else None,
        LiveSettings(policy="fixed:3" if draft else "nospec", gamma_max=3),
        max_model_len=2048,
        max_num_seqs=64,
        spec_tokens=3,
    )
    kwargs = engine_kwargs(spec)
    kwargs["max_num_batched_tokens"] = 2048
    llm = LLM(**kwargs)
    engine = llm.llm_engine
    rng = np.random.default_rng(0)

    def prompt(n: int) -> Any:
        return TokensPrompt(prompt_token_ids=rng.integers(3, 500, n).tolist())

    def step() -> tuple[float, set[str]]:
        start = time.perf_counter()
        outs = engine.step()
        return time.perf_counter() - start, {o.request_id for o in outs if o.finished}

    long = SamplingParams(temperature=0.0, max_tokens=100_000, ignore_eos=True)
    short = SamplingParams(temperature=0.0, max_tokens=prompt_output, ignore_eos=True)
    decoding = [f"d{i}" for i in range(batch)]
    for rid in decoding:
        engine.add_request(rid, prompt(32), long)
    for _ in range(5):  # warm-up
        step()
    rows = []
    cells = [(n, k) for n in TOKENS for k in PROMPTS]
    for rep in range(repeats):
        order = list(cells)
        rng.shuffle(order)
        for n, k in order:
            reference = [step()[0] for _ in range(REFERENCE_STEPS)]
            ids = [f"p{rep}-{n}-{k}-{j}" for j in range(k)]
            for rid in ids:
                engine.add_request(rid, prompt(n // k), short)
            mixed, done = step()
            rows.append({"n": n, "k": k, "repeat": rep, "mixed_ms": 1e3 * mixed,
                         "decode_ms": 1e3 * statistics.median(reference),
                         "added_ms": 1e3 * (mixed - statistics.median(reference))})
            while not set(ids) <= done:
                done |= step()[1]
    engine.abort_request(decoding)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=Path, default=Path("/tmp/agree/tiny"),
                        help="folder with target/ and draft/ (python -m nightjar.live.tiny)")
    parser.add_argument("--draft", action="store_true", help="the draft engine at K = 3")
    parser.add_argument("--batch", type=int, default=8, help="decoding requests")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--prompt-output", type=int, default=4,
                        help="output tokens of each new prompt")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    rows = measure(args.models, args.draft, args.batch, args.repeats, args.prompt_output)
    added = {(r["n"], r["k"], r["repeat"]): r["added_ms"] for r in rows}
    print(f"engine: {'draft, K = 3' if args.draft else 'no draft'}; B = {args.batch}; "
          f"load {load:.1f} -> {os.getloadavg()[0]:.1f}")
    for n in TOKENS:
        for k in PROMPTS:
            cell = mean_interval([added[(n, k, r)] for r in range(args.repeats)])
            print(f"  {n:4d} tokens as {k} prompt(s): added {cell.format('{:.0f}')} ms")
    slopes = [(added[(n, 8, r)] - added[(n, 1, r)]) / 7
              for n in TOKENS for r in range(args.repeats)]
    print(f"per extra prompt at fixed tokens: {mean_interval(slopes).format('{:.1f}')} ms")
    os._exit(0)  # vLLM's in-process engine core leaves threads behind


if __name__ == "__main__":
    main()
