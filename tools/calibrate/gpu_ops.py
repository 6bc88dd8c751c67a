"""Time one decoder layer's GEMMs and residual add on this GPU, in Vidur's extract format.

    python tools/calibrate/gpu_ops.py --out h200_ops.csv [--gpu-name h200] [--timing graph|events]

For every model shape of ``tools/calibrate/vidur/extract.csv`` (Llama-2-7B ... Qwen-72B), TP
degree 1 and 2 (one rank's shard) and token counts 1..4096, it times the four
projection GEMMs (``F.linear``, bf16, cuBLAS) and the residual add, each as the
median over replays of a CUDA graph of ``REPS`` back-to-back launches (GPU time
including the gaps between kernels, no host dispatch). Weights rotate over enough
copies to exceed twice the L2 cache, so no repetition reads weights from L2. Rows
are written in the extract's columns with ``gpu`` = ``--gpu-name``, so
``tools/calibrate/fit_vidur.py`` can fit or test them like Vidur's. Norms, rotary and the
activation are not timed: plain PyTorch runs them as several unfused kernels, where
Vidur's tables time fused ones. ``--timing events`` times each launch alone between
two CUDA events instead (as Vidur's timer does), to tell a timing-method difference
from the GPU's own behaviour.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import pandas as pd
import torch

import fit_vidur
from torch_decoder import graph_ms

EXTRACT = fit_vidur.EXTRACT
TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SHAPE = list(fit_vidur.SHAPE)  # the extract's shape columns
REPS = 10
TIMING = "graph"  # or "events" (--timing)
L2_MARGIN = 2 * 64 << 20  # bytes the rotating copies must exceed (H100/H200: 50/60 MB L2)


def gemm_shapes(row: pd.Series, tp: int) -> dict[str, tuple[int, int]]:
    """(k, n) of each projection GEMM of one TP rank: fit_vidur.design's shapes."""
    rows = pd.DataFrame([{**row[SHAPE].to_dict(), "tp": tp, "tokens": 1, "op": op}
                         for op in fit_vidur.GEMMS])
    d = fit_vidur.design(rows)
    return {op: (int(k), int(n)) for op, k, n in zip(fit_vidur.GEMMS, d["k"], d["n"], strict=True)}


def time_each(launch: list, device: torch.device) -> float:  # type: ignore[type-arg]
    """Median seconds of single eager launches, each between its own two CUDA events.

    Closer to how Vidur timed its tables (a CUDA-event timer around each op): a short
    kernel then also carries the gap until the host enqueues it.
    """
    for fn in launch[:3]:
        fn()
    torch.cuda.synchronize(device)
    times = []
    for fn in launch:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def time_launches(launch: list, device: torch.device) -> float:  # type: ignore[type-arg]
    """Median seconds per launch of the callables in ``launch``, run back to back."""
    def run() -> None:
        for fn in launch:
            fn()

    if TIMING == "events" and device.type == "cuda":
        return time_each(launch, device)
    # Median of a few replays of one graph holding every launch (GPU time only).
    return graph_ms(run, device, reps=3) * 1e-3 / len(launch)


def measure_gemm(t: int, k: int, n: int, device: torch.device, dtype: torch.dtype) -> float:
    nbytes = k * n * torch.finfo(dtype).bits // 8
    copies = max(1, min(REPS, -(-L2_MARGIN // nbytes)))
    weights = [torch.randn(n, k, device=device, dtype=dtype) * 0.02 for _ in range(copies)]
    x = torch.randn(t, k, device=device, dtype=dtype)
    out = torch.empty(t, n, device=device, dtype=dtype)
    launch = [lambda w=weights[i % copies]: torch.matmul(x, w.t(), out=out) for i in range(REPS)]
    return time_launches(launch, device)


def measure_add(t: int, h: int, device: torch.device, dtype: torch.dtype) -> float:
    nbytes = 3 * t * h * 2
    copies = max(1, min(REPS, -(-L2_MARGIN // max(nbytes, 1))))
    xs = [torch.randn(t, h, device=device, dtype=dtype) for _ in range(copies)]
    r = [torch.randn(t, h, device=device, dtype=dtype) for _ in range(copies)]
    launch = [lambda i=i: xs[i % copies].add_(r[i % copies]) for i in range(REPS)]
    return time_launches(launch, device)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--gpu-name", default="h200", help="the gpu column's value")
    ap.add_argument("--quick", action="store_true", help="two models, few token counts")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--timing", choices=("graph", "events"), default="graph",
                    help="graph: CUDA-graph replays (default); events: each launch alone")
    args = ap.parse_args(argv)
    global TIMING
    TIMING = args.timing
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = True
    shapes = pd.read_csv(EXTRACT, comment="#").drop_duplicates("model")[["model", *SHAPE]]
    tokens = TOKENS
    if args.quick:
        shapes, tokens = shapes.sort_values("n_embd").head(2), (1, 16)
    rows = []
    start = time.perf_counter()
    for _, row in shapes.iterrows():
        for tp in (1, 2):
            for t in tokens:
                for op, (k, n) in gemm_shapes(row, tp).items():
                    rows.append((row, tp, t, op, measure_gemm(t, k, n, device, dtype)))
                rows.append((row, tp, t, "add", measure_add(t, int(row.n_embd), device, dtype)))
            if device.type == "cuda":
                torch.cuda.empty_cache()
        print(f"{row.model}: {time.perf_counter() - start:.0f} s", flush=True)
    out = pd.DataFrame(
        [
            {"gpu": args.gpu_name, "model": r.model, "tp": tp, "tokens": t,
             **{c: r[c] for c in SHAPE}, "op": op, "measured_s": s}
            for r, tp, t, op, s in rows
        ]
    )
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    header = (
        f"# Measured by tools/calibrate/gpu_ops.py on {name}, torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}: median GPU time per launch, "
        + (f"CUDA-graph replays of {REPS} launches" if TIMING == "graph"
           else f"{REPS} eager launches each between two CUDA events")
        + f"; {'bf16' if dtype == torch.bfloat16 else 'fp32'}.\n"
    )
    args.out.write_text(header + out.to_csv(index=False, float_format="%.6g"), encoding="utf-8")
    print(f"{len(out)} rows -> {args.out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
