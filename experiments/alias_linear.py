"""What aliasing the draft's weights costs on CPU: vLLM's prepacked linears vs F.linear.

On CPU vLLM 0.32.0 replaces each linear's weight by a prepacked handle (oneDNN, or
the sgl kernel for small shapes) and empties the parameter, so a weight that lives
inside the KV ballast can only be read through a plain ``F.linear`` on the view, or
repacked into a new handle at every reload (which is a second copy of the weights:
the aliasing would then save nothing while the draft is resident). This probe times,
for the draft layer shapes of the two tiny pairs, one draft layer's linears plus
lm_head at several token counts M (= batch x (gamma + 1)) both ways, and the repack.

Usage (live venv, libiomp5 preloaded):
    python experiments/alias_linear.py [--rounds 7] [--calls 30]
Timings on a shared machine are noisy: each cell is the mean of ``rounds`` medians
with its 95% interval (nightjar.results.stats); "A beats B" only where intervals separate.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import torch

from nightjar.live.tiny import SMALL, TinySpec
from nightjar.results.stats import compare, mean_interval


def draft_shapes(spec: TinySpec) -> list[tuple[str, int, int]]:
    """(name, N, K) of one Llama layer's linears and lm_head."""
    head = spec.hidden // spec.heads
    return [
        ("qkv", (spec.heads + 2 * spec.kv_heads) * head, spec.hidden),
        ("o", spec.hidden, spec.hidden),
        ("gate_up", 2 * spec.intermediate, spec.hidden),
        ("down", spec.hidden, spec.intermediate),
        ("lm_head", spec.vocab, spec.hidden),
    ]


class Layer(torch.nn.Module):
    def __init__(self, n: int, k: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(n, k) / k**0.5, requires_grad=False)
        self.bias = None
        self.cpu_linear: Any = None


def _median_call_s(fn: Any, calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm

    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    torch.manual_seed(0)
    print("pair   M    prepacked ms      F.linear(view) ms   ratio  verdict   repack ms")
    for name, spec in (("small", SMALL), ("default", TinySpec())):
        shapes = draft_shapes(spec)
        packed = []
        views = []
        repack = 0.0
        for _, n, k in shapes:
            layer = Layer(n, k)
            # The view a KV region would hold: same bytes, different storage.
            region = torch.empty(n * k * 4 + 64, dtype=torch.int8)
            view = region[: n * k * 4].view(torch.float32).view(n, k)
            view.copy_(layer.weight)
            views.append(view)
            start = time.perf_counter()
            dispatch_cpu_unquantized_gemm(layer, remove_weight=False)
            repack += time.perf_counter() - start
            packed.append(layer)
        for m in (1, 4, 16, 64):
            xs = [torch.randn(m, k) for _, _, k in shapes]

            def run_packed(packed: list[Layer] = packed, xs: list[Any] = xs) -> None:
                for layer, x in zip(packed, xs, strict=True):
                    layer.cpu_linear(x, layer.weight, None)

            def run_view(views: list[Any] = views, xs: list[Any] = xs) -> None:
                for w, x in zip(views, xs, strict=True):
                    torch.nn.functional.linear(x, w, None)

            a, b = [], []
            for _ in range(args.rounds):
                a.append(_median_call_s(run_packed, args.calls) * 1e3)
                b.append(_median_call_s(run_view, args.calls) * 1e3)
            ia, ib = mean_interval(a), mean_interval(b)
            verdict = {">": "view faster", "<": "packed faster", "~": "no claim"}[compare(ia, ib)]
            print(
                f"{name:7s}{m:<4d} {ia.format('{:.3f}'):17s} {ib.format('{:.3f}'):19s} "
                f"{ib.mean / ia.mean:5.2f}  {verdict:13s} {repack * 1e3:.1f}"
            )


if __name__ == "__main__":
    main()
