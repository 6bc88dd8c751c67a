"""Set the H200 measurements (tools/calibrate/measured/h200/) next to the roofline's prices.

    python tools/calibrate/gpu_compare.py [--dir tools/calibrate/measured/h200] [--gpu h200]

Prints docs/profiles.md's "Measured on an H200" tables (markdown): per-op GEMM error
of the fitted model at the catalogue GPU's specifications, the plain-PyTorch decoder's
CUDA-graph forward against the roofline's GPU time for the same shape, attention
against the analytic term, and the host time per eagerly launched kernel. Runs on
any machine: it reads the committed measurements and prices them here.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

import fit_vidur  # the sibling script in this folder
from nightjar.roofline.calibration.fits import fit_for
from nightjar.roofline.calibration.ops import gemm_times_s
from nightjar.roofline.costs import RooflineParams, forward_s, prefill_s, resolve
from nightjar.roofline.hardware import GPU, get_gpu, get_model

HERE = Path(__file__).resolve().parent


def _fit(gpu: GPU):  # type: ignore[no-untyped-def]
    # As the roofline prices it: a borrowed table's T_half scaled by the ridge point.
    return fit_for(resolve(RooflineParams(), gpu).op_fit, gpu)


def gemm_table(ops: pd.DataFrame, gpu: GPU) -> str:
    g = ops[ops["op"].isin(fit_vidur.GEMMS)].reset_index(drop=True)
    d = fit_vidur.design(g)  # each row's GEMM shape, as the fit prices it
    pred = gemm_times_s(_fit(gpu), gpu.peak_flops, gpu.mem_bandwidth_bytes_per_s,
                        d["t"], d["k"], d["n"])
    g["err"] = pred / g["measured_s"].to_numpy(float) - 1
    lines = ["| tokens | rows | median error | median abs error |", "|---|---|---|---|"]
    for lo, hi in ((1, 64), (128, 512), (1024, 4096)):
        part = g[(g["tokens"] >= lo) & (g["tokens"] <= hi)]["err"]
        lines.append(f"| {lo}-{hi} | {len(part)} | {part.median():+.1%} | "
                     f"{part.abs().median():.1%} |")
    e = g["err"]
    lines.append(f"| all | {len(e)} | {e.median():+.1%} | {e.abs().median():.1%} |")
    return "\n".join(lines)


def forward_table(steps: dict, gpu: GPU) -> str:  # type: ignore[type-arg]
    p = RooflineParams(forward_overhead_s=0.0)  # GPU time only, as a graph replay measures
    lines = ["| model | B | measured (graph) | roofline GPU time | measured / roofline |",
             "|---|---|---|---|---|"]
    for m in steps["models"]:
        arch = get_model(m["model"])
        for row in m["decode"]:
            b = row["batch"]
            priced = forward_s(gpu, arch, p, tokens=b, seqs=b, context=m["context"]) * 1e3
            lines.append(f"| {m['model']} | {b} | {row['graph_ms']:.3f} ms | {priced:.3f} ms | "
                         f"{row['graph_ms'] / priced:.2f} |")
    return "\n".join(lines)


def prefill_table(steps: dict, gpu: GPU) -> str:  # type: ignore[type-arg]
    p = RooflineParams(forward_overhead_s=0.0)
    lines = ["| model | prompt tokens | measured (eager) | roofline GPU time |",
             "|---|---|---|---|"]
    for m in steps["models"]:
        arch = get_model(m["model"])
        for row in m["prefill"]:
            priced = prefill_s(gpu, arch, p, row["tokens"]) * 1e3
            lines.append(f"| {m['model']} | {row['tokens']} | {row['eager_ms']:.2f} ms | "
                         f"{priced:.2f} ms |")
    return "\n".join(lines)


def eager_table(steps: dict) -> str:  # type: ignore[type-arg]
    lines = ["| model | kernels per forward | graph, B = 1 | eager, B = 1 | host per kernel |",
             "|---|---|---|---|---|"]
    for m in steps["models"]:
        one = next(r for r in m["decode"] if r["batch"] == 1)
        per = one["eager_ms"] * 1e3 / m["kernels_per_forward"]
        lines.append(f"| {m['model']} | {m['kernels_per_forward']} | {one['graph_ms']:.2f} ms | "
                     f"{one['eager_ms']:.2f} ms | {per:.1f} us |")
    return "\n".join(lines)


def attention_table(att: pd.DataFrame, gpu: GPU) -> str:
    """Measured attention vs the roofline's attention term for Llama-3.1-8B's shape."""
    fit = _fit(gpu)
    m = get_model("llama-3.1-8b")
    kv_layer = m.kv_bytes_per_token / m.layers
    flops = m.attention_flops_per_token_per_ctx / m.layers
    lines = ["| kind | B | context | measured | roofline | measured / roofline |",
             "|---|---|---|---|---|---|"]
    for r in att.itertuples():
        tokens = r.batch * r.q_len
        pairs = r.q_len * (r.q_len + 1) / 2 if r.kind == "prefill" else tokens * r.context
        reads = r.batch * r.context
        priced = 2 * fit.gemm_launch_s + max(
            flops * pairs / (gpu.peak_flops * fit.gemm_eff_max),
            (reads + tokens) * kv_layer / (gpu.mem_bandwidth_bytes_per_s * fit.gemm_mem_eff),
        )
        if r.kind != "prefill" and r.context not in (512, 8192):
            continue
        lines.append(f"| {r.kind} | {r.batch} | {r.context} | {r.measured_s * 1e6:.1f} us | "
                     f"{priced * 1e6:.1f} us | {r.measured_s / priced:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=HERE / "measured" / "h200")
    ap.add_argument("--gpu", default="h200", help="the catalogue GPU that prices them")
    args = ap.parse_args(argv)
    gpu = get_gpu(args.gpu)
    ops = fit_vidur.load_measured(args.dir / "ops.csv")
    steps = json.loads((args.dir / "steps.json").read_text())
    att = pd.read_csv(args.dir / "attention.csv", comment="#")
    print(f"#### GEMMs: fitted model ({resolve(RooflineParams(), gpu).op_fit} fit at "
          f"{gpu.name}'s specifications) vs measured\n\n{gemm_table(ops, gpu)}\n")
    print(f"#### Decode forwards, context 512 (plain-PyTorch decoder, CUDA graph)\n\n"
          f"{forward_table(steps, gpu)}\n")
    print(f"#### Prefill forwards, one sequence\n\n{prefill_table(steps, gpu)}\n")
    print(f"#### Host time per eagerly launched kernel\n\n{eager_table(steps)}\n")
    print(f"#### Attention, Llama-3.1-8B shape, one layer\n\n{attention_table(att, gpu)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
