"""Time one layer's attention on this GPU: decode, verify and prefill shapes.

    python tools/calibrate/gpu_attention.py --out h200_attention.csv

The roofline prices attention analytically (nightjar/roofline/costs.py: a fixed launch plus
max(FLOPs at the GEMM plateau, KV bytes at the weight-read efficiency)), because
Vidur's measured attention tables sit in Git LFS. This measures the real kernel
instead: ``F.scaled_dot_product_attention`` (FlashAttention backend where it takes
the shape, else PyTorch's default choice, recorded per row) on a dense bf16 KV
cache of Llama-3.1-8B's attention shape (32 query heads, 8 KV heads, head dim 128),
timed as CUDA-graph replays of ``REPS`` launches. Rows: ``q_len`` 1 (decode), 4
(a gamma-3 verify pass, every query seeing the whole context), and prefill (one
sequence, causal, ``q_len`` = context).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_decoder import graph_ms

HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
REPS = 10
DECODE = [(b, c) for b in (1, 4, 16, 64, 256) for c in (128, 512, 2048, 8192)]
PREFILL = (128, 512, 1024, 2048, 4096, 8192)
L2_MARGIN = 2 * 64 << 20


def measure(b: int, q_len: int, ctx: int, causal: bool, device: torch.device) -> tuple[float, str]:
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    kv_bytes = 2 * b * KV_HEADS * ctx * HEAD_DIM * 2
    copies = max(1, min(REPS, -(-L2_MARGIN // kv_bytes)))
    q = torch.randn(b, HEADS, q_len, HEAD_DIM, device=device, dtype=dtype)
    kv_shape = (b, KV_HEADS, ctx, HEAD_DIM)
    ks = [torch.randn(kv_shape, device=device, dtype=dtype) for _ in range(copies)]
    vs = [torch.randn(kv_shape, device=device, dtype=dtype) for _ in range(copies)]

    def run() -> None:
        for i in range(REPS):
            F.scaled_dot_product_attention(
                q, ks[i % copies], vs[i % copies], is_causal=causal, enable_gqa=True
            )

    for backend, ctxmgr in (("flash", sdpa_kernel(SDPBackend.FLASH_ATTENTION)), ("default", None)):
        try:
            if ctxmgr is None:
                return graph_ms(run, device) * 1e-3 / REPS, backend
            with ctxmgr:
                return graph_ms(run, device) * 1e-3 / REPS, backend
        except RuntimeError:
            continue
    raise RuntimeError("no attention backend took the shape")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    decode = DECODE[:2] if args.quick else DECODE
    prefill = PREFILL[:1] if args.quick else PREFILL
    rows = []
    start = time.perf_counter()
    with torch.inference_mode():
        for b, ctx in decode:
            for q_len in (1, 4):
                s, backend = measure(b, q_len, ctx, False, device)
                rows.append(("decode" if q_len == 1 else "verify", b, q_len, ctx, s, backend))
            if device.type == "cuda":
                torch.cuda.empty_cache()
        for n in prefill:
            s, backend = measure(1, n, n, True, device)
            rows.append(("prefill", 1, n, n, s, backend))
    out = pd.DataFrame(rows, columns=["kind", "batch", "q_len", "context", "measured_s", "backend"])
    out[["heads", "kv_heads", "head_dim"]] = HEADS, KV_HEADS, HEAD_DIM
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    header = f"# tools/calibrate/gpu_attention.py on {name}, torch {torch.__version__}\n"
    args.out.write_text(header + out.to_csv(index=False, float_format="%.6g"), encoding="utf-8")
    print(f"{len(out)} rows -> {args.out} in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
