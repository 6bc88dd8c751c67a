"""The speculative trade-off on this CPU, in output tokens/s: fixed:3 against no
speculation at batch 1 and batch 32, with the design guide's 105M-parameter pair.

    LD_PRELOAD=$(find .venv-live -name libiomp5.so | head -1) \
        .venv-live/bin/python benchmarks/live_tradeoff.py [--repeats 3]

Run it alone: it is a wall-clock figure (it was a test until a busy CI machine put
the two rates at B = 32 within 0.1% of each other). Each rate is the best of
``--repeats`` runs; the script prints the rates, their ratio, and the load average.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

OUT = 64
BATCHES = (1, 32)


def _greedy(llm: Any, prompts: list[list[int]], out: int) -> None:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = SamplingParams(temperature=0.0, max_tokens=out, ignore_eos=True)
    llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)


def _tok_s(llm: Any, batch: int, repeats: int) -> float:
    rng = random.Random(batch)
    prompts = [[rng.randrange(3, 8192) for _ in range(32)] for _ in range(batch)]
    best = 0.0
    for _ in range(repeats):
        start = time.perf_counter()
        _greedy(llm, prompts, OUT)
        best = max(best, batch * OUT / (time.perf_counter() - start))
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    from nightjar.live.engine_spec import EngineSpec, open_llm, prepare_env
    from nightjar.live.settings import LiveSettings
    from nightjar.live.tiny import TinySpec, build

    prepare_env()
    pair = build(Path(tempfile.mkdtemp(prefix="nightjar-tradeoff-")), TinySpec())
    rates: dict[str, dict[int, float]] = {}
    for name, draft, gamma in (("nospec", None, 0), ("fixed:3", str(pair.draft), 3)):
        spec = EngineSpec(
            str(pair.target), draft, LiveSettings(policy=name, gamma_max=gamma),
            max_model_len=256, max_num_seqs=32, kv_cache_bytes=256 << 20,
        )
        with open_llm(spec) as llm:
            _greedy(llm, [[5, 6, 7]], 8)  # warm-up
            rates[name] = {b: _tok_s(llm, b, args.repeats) for b in BATCHES}
    print(f"load average (1 min): {os.getloadavg()[0]:.2f}")
    for b in BATCHES:
        ns, f3 = rates["nospec"][b], rates["fixed:3"][b]
        print(f"B={b:>2}: nospec {ns:7.1f} tok/s  fixed:3 {f3:7.1f} tok/s  ratio {f3 / ns:.3f}")


if __name__ == "__main__":
    main()
