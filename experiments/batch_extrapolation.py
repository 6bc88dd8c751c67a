"""Past the profile's batch grid: flat or linear? (issue 21)

A measured profile's decode table stops at B = 64 (the profiler's default grid), while
``nightjar live`` and ``nightjar bench live`` cap batches at 256. On an overload trace
the live engine ran batches of 109-171, and the simulator, holding the table flat
past its last column, priced those steps 22-44% under what they took. This measures
pure decode steps at batch sizes inside and past that grid on one engine (windows of
B requests that start together, the sizes in rotated order round by round), then
prices the sizes past ``--grid-top`` two ways from the measured sizes at or under it:
flat at the top (the old rule) and linear along the last segment (the rule of
:mod:`nightjar.profile.profile` now). Run it alone on the machine.

    LD_PRELOAD=... .venv-live/bin/python experiments/batch_extrapolation.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

from tiny_engine import nospec_engine  # the sibling script in this folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--batch", type=int, nargs="+", default=[32, 64, 96, 128, 160])
    parser.add_argument("--grid-top", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=48)
    parser.add_argument("--output", type=int, default=24)
    args = parser.parse_args()

    from nightjar.live.engine_spec import open_llm, prepare_env
    from nightjar.live.steplog import read_log

    prepare_env()
    import numpy as np
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    top = max(args.batch)
    spec, log = nospec_engine("nj-batch-", top, max_num_batched_tokens=top * args.prompt)
    rng = np.random.default_rng(0)
    params = SamplingParams(temperature=0.0, max_tokens=args.output, ignore_eos=True)
    spans: list[tuple[int, float, float]] = []
    with open_llm(spec) as llm:
        def window(b: int) -> None:
            ids = rng.integers(3, 8192, size=(b, args.prompt))
            llm.generate([TokensPrompt(prompt_token_ids=[int(t) for t in row]) for row in ids],
                         params, use_tqdm=False)

        window(4)
        for r in range(args.rounds):
            k = r % len(args.batch)
            for b in args.batch[k:] + args.batch[:k]:
                start = time.monotonic()
                window(b)
                spans.append((b, start, time.monotonic()))
    steps = read_log(str(log)).steps
    per: dict[int, list[float]] = {}
    ctx: dict[int, list[float]] = {}
    for b, s, e in spans:
        sel = [st for st in steps if s <= st.time_s <= e and st.prefill_tokens == 0
               and st.batch_size == b]
        per.setdefault(b, []).extend(st.step_time_s for st in sel)
        ctx.setdefault(b, []).extend(st.mean_context_len for st in sel)
    med = {b: statistics.median(v) for b, v in per.items()}
    inside = sorted(b for b in med if b <= args.grid_top)
    lo, hi = inside[-2], inside[-1]
    slope = max(0.0, (med[hi] - med[lo]) / (hi - lo))
    print(f"pure decode steps, prompt {args.prompt}, output {args.output}, "
          f"{args.rounds} rounds; grid top {args.grid_top} (segment {lo}-{hi})")
    print("B     steps  median ms  mean ctx   flat ms  error   linear ms  error")
    for b in sorted(med):
        flat = med[min(b, hi)] if b > hi else med[b]
        lin = med[hi] + slope * (b - hi) if b > hi else med[b]
        print(f"{b:<5} {len(per[b]):>5}  {1e3 * med[b]:9.1f}  {statistics.mean(ctx[b]):8.1f}  "
              f"{1e3 * flat:8.1f}  {100 * (flat / med[b] - 1):+5.1f}%  {1e3 * lin:9.1f}  "
              f"{100 * (lin / med[b] - 1):+5.1f}%")


if __name__ == "__main__":
    main()
