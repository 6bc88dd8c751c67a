"""Does a ladder measure the decode cells that one window per batch size does? (issue 21)

A ladder (nightjar.live.profiling.ladder) prefills the largest batch once and lets
it shrink through the smaller sizes, the prompts set so that each rung's mean
context is the nominal one; the requests' contexts then spread around that mean
where a plain window's are all equal. This runs both on the no-draft engine at one
context, alternating (ladder first in even rounds), and prints each batch size's
median gamma-0 step per way with the ratio, and the seconds each way took.
``--spread B`` instead runs plain windows of B requests two ways, all prompts equal or
with the contexts the ladder's rung of B has (same mean, same output), to tell
whether a rung's price comes from its spread of contexts. Run it alone on the machine.

    LD_PRELOAD=... .venv-live/bin/python experiments/ladder_check.py TARGET DRAFT \
        [--context 512] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target")
    parser.add_argument("draft")
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--spread", type=int, nargs="*", default=None, metavar="B")
    args = parser.parse_args()

    from nightjar.live.engine_spec import prepare_env

    prepare_env()
    from nightjar.live.profiling.build import decode_cells
    from nightjar.live.profiling.grid import ProfilePlan
    from nightjar.live.profiling.session import NODRAFT, Session, started_engines

    plan = ProfilePlan(args.target, args.draft, "target", "draft", vocab=args.vocab,
                       contexts=(args.context,))
    ladder = plan.decode_chains(args.context)
    apart = replace(plan, ladders=False).decode_chains(args.context)
    seconds: dict[str, list[float]] = {"ladder": [], "apart": []}
    with tempfile.TemporaryDirectory() as tmp, started_engines(
        plan, Path(tmp), (NODRAFT,)
    ) as engines:
        session = Session(plan, engines, lambda _k: None)
        session.decode(NODRAFT, (1,), args.context, 8, counted=False)  # warm up
        session.windows[NODRAFT].clear()
        if args.spread:
            _spread(session, engines[NODRAFT], plan, ladder[0], args)
            return
        for r in range(args.rounds):
            ways = [("ladder", ladder), ("apart", apart)]
            for way, windows in ways if r % 2 == 0 else ways[::-1]:
                started = time.monotonic()
                for rungs in windows:
                    session.decode(NODRAFT, rungs, args.context)
                seconds[way].append(time.monotonic() - started)
                print(f"round {r + 1} {way}: {seconds[way][-1]:.1f} s", flush=True)
        run = session.collect()[NODRAFT]
    laddered = replace(run, windows=[w for w in run.windows if w.rungs])
    plain = replace(run, windows=[w for w in run.windows if not w.rungs])
    a, b = decode_cells(laddered, 0), decode_cells(plain, 0)
    print(f"\ncontext {args.context}, ladder {ladder[0]}, {args.rounds} rounds alternating")
    print("| B | plain ms (steps) | ladder ms (steps) | ladder / plain |")
    print("|---|---|---|---|")
    for size in sorted(plan.batch_sizes):
        key = (size, args.context)
        if key in a and key in b:
            print(f"| {size} | {b[key][0]:.1f} ({b[key][3]}) | {a[key][0]:.1f} ({a[key][3]}) "
                  f"| {a[key][0] / b[key][0]:.3f} |")
    print(f"\nseconds per pass: ladder {statistics.median(seconds['ladder']):.1f}, "
          f"one window per size {statistics.median(seconds['apart']):.1f}")


def _spread(session: Any, engine: Any, plan: Any, rungs: tuple[int, ...], args: Any) -> None:
    from nightjar.live.profiling.build import Window, decode_cells
    from nightjar.live.profiling.ladder import requests
    from nightjar.live.profiling.session import NODRAFT

    out, c = plan.output_tokens, args.context
    shapes = requests(rungs, c, out)
    for b in args.spread:
        k = rungs.index(b)
        # The contexts of rung k's requests at its start, as prompts of a plain window.
        spread = [p + k * out for p, o in shapes if o > k * out]
        ways = {"equal": [c - out // 2] * b, "spread": spread}
        for r in range(args.rounds):
            for way in (("equal", "spread") if r % 2 == 0 else ("spread", "equal")):
                prompts = [engine.prompts(1, n, session.rng)[0] for n in ways[way]]
                start, end, ids = engine.generate(prompts, out, None)
                # (context tagged by way: equal at c, spread at c + 1)
                tag = c if way == "equal" else c + 1
                session.windows[NODRAFT].append(Window("decode", b, tag, start, end, ids))
    run = session.collect()[NODRAFT]
    cells = decode_cells(run, 0)
    print(f"\ncontext {c}: plain windows, equal prompts vs the ladder's rung contexts")
    print("| B | equal ms (steps) | spread ms (steps) | spread / equal | contexts |")
    print("|---|---|---|---|---|")
    for b in args.spread:
        e, s = cells[(b, c)], cells[(b, c + 1)]
        k = rungs.index(b)
        ctx = sorted({p + k * out + out // 2 for p, o in shapes if o > k * out})
        print(f"| {b} | {e[0]:.1f} ({e[3]}) | {s[0]:.1f} ({s[3]}) | {s[0] / e[0]:.3f} | "
              f"{ctx[0]}-{ctx[-1]} |")


if __name__ == "__main__":
    main()
