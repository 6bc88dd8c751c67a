"""Forward times of catalogue model shapes on this GPU: CUDA graph vs eager, and sampling.

    python tools/calibrate/gpu_steps.py --out h200_steps.json [--quick]

With the plain-PyTorch decoder of ``torch_decoder.py`` (random bf16 weights, dense KV
cache, unfused norms and rotary), for each model of ``MODELS``:

* ``decode``: one decode forward of B sequences at context ``CONTEXT``, CUDA-graph
  time (GPU only) and eager time (host dispatch included) per B;
* ``prefill``: one sequence of n prompt tokens, eager (GPU-bound at these sizes);
* ``kernels``: GPU kernels one eager decode forward launches (torch profiler), so
  the eager-minus-graph gap divided by them is the host time per kernel launch.

``sampling``: argmax and softmax over fp32 logits of B rows x 152,064 entries. The
output feeds ``tools/calibrate/gpu_compare.py``, which sets these numbers next to the
roofline's (docs/profiles.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from nightjar.roofline.hardware import get_model
from torch_decoder import Decoder, cache_bytes, eager_ms, gib, graph_ms, kernel_count

MODELS = ("llama-3.1-8b", "deepseek-r1-distill-qwen-7b", "qwen2.5-0.5b", "vicuna-68m")
BATCHES = (1, 4, 16, 64, 256)
EAGER_BATCHES = (1, 16)
PROMPTS = (128, 512, 2048)
CONTEXT = 512
VOCAB_ROWS = 152064


def measure_model(
    name: str, device: torch.device, dtype: torch.dtype, quick: bool
) -> dict[str, Any]:
    s = get_model(name)
    batches = BATCHES[:2] if quick else BATCHES
    prompts = PROMPTS[:1] if quick else PROMPTS
    max_len = max(CONTEXT + 1, max(prompts))
    model = Decoder(s, max(batches), max_len, device, dtype)
    out: dict[str, Any] = {"model": name, "context": CONTEXT, "decode": [], "prefill": []}
    for b in batches:
        ids = torch.randint(0, s.vocab, (b, 1), device=device)
        step = lambda ids=ids: model.forward(ids, CONTEXT)  # noqa: E731
        row: dict[str, Any] = {"batch": b, "graph_ms": graph_ms(step, device)}
        if b in EAGER_BATCHES:
            row["eager_ms"] = eager_ms(step, device)
        out["decode"].append(row)
        print(f"{name} decode B={b}: {row}", flush=True)
    one = torch.randint(0, s.vocab, (1, 1), device=device)
    out["kernels_per_forward"] = kernel_count(lambda: model.forward(one, CONTEXT), device)
    for n in prompts:
        ids = torch.randint(0, s.vocab, (1, n), device=device)
        ms = eager_ms(lambda ids=ids: model.forward(ids, 0), device)
        out["prefill"].append({"tokens": n, "eager_ms": ms})
    print(f"{name}: kernels {out['kernels_per_forward']}, prefill {out['prefill']}", flush=True)
    out["kv_cache_gib"] = gib(cache_bytes(s, max(batches), max_len))
    return out


def measure_sampling(device: torch.device, quick: bool) -> list[dict[str, Any]]:
    rows = []
    for b in (1, 16) if quick else (1, 16, 64, 256):
        logits = torch.randn(b, VOCAB_ROWS, device=device, dtype=torch.float32)
        rows.append({
            "rows": b,
            "argmax_ms": eager_ms(lambda x=logits: x.argmax(-1), device),
            "softmax_ms": eager_ms(lambda x=logits: torch.softmax(x, -1), device),
            "argmax_graph_ms": graph_ms(lambda x=logits: x.argmax(-1), device),
        })
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    start = time.perf_counter()
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "dtype": str(dtype),
        "method": "tools/calibrate/gpu_steps.py: plain-PyTorch decoder (torch_decoder.py)",
        "models": [],
    }
    with torch.inference_mode():
        for name in args.models.split(","):
            result["models"].append(measure_model(name, device, dtype, args.quick))
            if device.type == "cuda":
                torch.cuda.empty_cache()  # the model and its cache went with the call
            args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
        result["sampling"] = measure_sampling(device, args.quick)
    result["seconds"] = time.perf_counter() - start
    args.out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"-> {args.out} in {result['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
