"""What reading a row-split draft weight costs: whole vs chunked embedding and LM head.

An aliased draft's embedding and LM head larger than one layer's chunk of the KV
ballast region are split by rows over several chunks (experiments/alias_layout.py
prints the pieces), and run piece by piece: ``chunked_embedding`` (one clamped
lookup per piece and a select) and ``chunked_linear`` (one GEMM per piece,
concatenated). This times both against the whole-tensor ``F.embedding`` /
``F.linear`` at several token counts M (= batch x (gamma + 1)) and says whether the
results are bitwise equal. Each call is timed alone (synchronized), so on CUDA the
eager numbers are launch-bound; ``--graph`` times CUDA-graph replays instead.

Usage: python experiments/alias_chunked.py [--device cpu|cuda] [--rounds 7] [--calls 30]
       [--cases tiny-small,tiny-default,qwen-0.5b] [--dtype bfloat16] [--graph]
       (needs torch: the live venv)
Each cell is the mean of ``rounds`` medians with its 95% interval (nightjar.results.stats);
"A beats B" only where the intervals separate. The qwen-0.5b case (151,936 x 896)
is meant for CUDA (bf16); on a shared CPU it takes minutes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial

import torch

from nightjar.live.residency.alias import PIECE_ROWS, chunked_embedding, chunked_linear
from nightjar.results.stats import compare, mean_interval

# (vocab, hidden, pieces of the embedding/LM head as experiments/alias_layout.py plans them)
CASES = {
    "tiny-small": (2048, 256, 2),
    "tiny-default": (8192, 1024, 3),
    "qwen-0.5b": (151936, 896, 8),
}


def pieces_of(w: torch.Tensor, k: int) -> list[tuple[int, torch.Tensor]]:
    """``k`` near-equal row pieces, cut at multiples of PIECE_ROWS, each its own copy."""
    step = -(-w.shape[0] // k)
    step = -(-step // PIECE_ROWS) * PIECE_ROWS
    return [(i, w[i : i + step].clone()) for i in range(0, w.shape[0], step)]


def timed(fn: Callable[[], torch.Tensor], calls: int, cuda: bool) -> float:
    fn()
    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    if cuda:
        torch.cuda.synchronize()
    return (time.perf_counter() - start) / calls * 1000.0


def graphed(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """``fn`` captured in a CUDA graph (as vLLM runs the drafter); calling replays it."""
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--cases", default="tiny-small,tiny-default")
    ap.add_argument("--dtype", default="", help="float32 (CPU default) or bfloat16 (CUDA)")
    ap.add_argument("--graph", action="store_true", help="CUDA: time CUDA-graph replays")
    args = ap.parse_args()
    cuda = args.device.startswith("cuda")
    dtype = getattr(torch, args.dtype or ("bfloat16" if cuda else "float32"))
    gen = torch.Generator().manual_seed(0)
    how = "CUDA-graph replays" if args.graph else "eager calls"
    print(f"device {args.device}, {dtype}, {args.rounds} rounds x {args.calls} {how}, ms")
    print(f"{'case':13s} {'op':9s} {'M':>4s} {'whole':>16s} {'chunked':>16s} {'ratio':>6s}  "
          f"{'verdict':16s} bitwise")
    for name in args.cases.split(","):
        vocab, hidden, k = CASES[name]
        w = torch.randn(vocab, hidden, generator=gen).to(args.device, dtype)
        parts = pieces_of(w, k)
        firsts = torch.tensor([f for f, _ in parts], device=args.device)  # as the engine keeps
        for m in (1, 4, 16, 64):
            x = torch.randn(m, hidden, generator=gen).to(args.device, dtype)
            ids = torch.randint(0, vocab, (m,), generator=gen).to(args.device)
            ops: dict[str, tuple[Callable[[], torch.Tensor], Callable[[], torch.Tensor]]] = {
                "embedding": (
                    partial(torch.nn.functional.embedding, ids, w),
                    partial(chunked_embedding, ids, parts, firsts),
                ),
                "lm_head": (
                    partial(torch.nn.functional.linear, x, w),
                    partial(chunked_linear, x, parts),
                ),
            }
            for op, (whole, chunked) in ops.items():
                if args.graph:
                    whole, chunked = graphed(whole), graphed(chunked)
                same = torch.equal(whole(), chunked())
                a: list[float] = []
                b: list[float] = []
                for _ in range(args.rounds):
                    a.append(statistics.median(timed(whole, 1, cuda) for _ in range(args.calls)))
                    b.append(statistics.median(timed(chunked, 1, cuda) for _ in range(args.calls)))
                ia, ib = mean_interval(a), mean_interval(b)
                verdict = {">": "whole slower", "<": "chunked slower", "~": "no claim"}[
                    compare(ia, ib)
                ]
                print(
                    f"{name:13s} {op:9s} {m:4d} {ia.format('{:.4f}'):>16s} "
                    f"{ib.format('{:.4f}'):>16s} {ib.mean / ia.mean:6.2f}  {verdict:16s} "
                    f"{'yes' if same else 'NO'}"
                )


if __name__ == "__main__":
    main()
