"""Is a step that follows an idle engine slower than the same step on a busy one? (issue 21)

In replays, prefill-only steps (a prompt arriving at an empty engine) ran 20-60%
slower than the measured profile prices them, on every trace, at low load too.
Such a step follows an idle gap; the profiler's prefill windows follow its other
windows at once. This submits one prompt (``--prompt`` tokens, one output token: a
prefill-only step) after idle gaps of several lengths, the gaps in rotated order
round by round, on one engine, and prints the step-log time per gap.
Run it alone on the machine.

    LD_PRELOAD=... .venv-live/bin/python experiments/idle_wake.py [--rounds 6]
"""

from __future__ import annotations

import argparse
import statistics
import time

from tiny_engine import nospec_engine  # the sibling script in this folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--gaps", type=float, nargs="+", default=[0.0, 0.3, 1.0, 3.0])
    args = parser.parse_args()

    from nightjar.live.plugins.engine import open_llm, prepare_env
    from nightjar.live.steplog import read_log

    prepare_env()
    import numpy as np
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    spec, log = nospec_engine("nj-idle-", 8)
    rng = np.random.default_rng(0)
    params = SamplingParams(temperature=0.0, max_tokens=1, ignore_eos=True)
    marks: list[tuple[float, float]] = []  # (gap, submit time)
    with open_llm(spec) as llm:
        def one() -> float:
            ids = [int(t) for t in rng.integers(3, 8192, size=args.prompt)]
            start = time.monotonic()
            llm.generate([TokensPrompt(prompt_token_ids=ids)], params, use_tqdm=False)
            return start

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


if __name__ == "__main__":
    main()
