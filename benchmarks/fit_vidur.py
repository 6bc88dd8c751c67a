"""Fit the roofline's operator coefficients to Vidur's measured per-layer op times.

Source: Microsoft Vidur (MIT licence), github.com/microsoft/vidur at commit 7d47513,
``data/profiling/compute/{a100,h100,a40}/<org>/<model>/mlp.csv``: CUDA-timed median
times (ms) of every linear and element-wise op of one decoder layer, by token count
and tensor-parallel degree.

    python benchmarks/fit_vidur.py --vidur /tmp/vidur/data/profiling/compute \
        [--write-coefficients] [--write-extract] [--markdown]

Without ``--vidur`` it fits the committed extract (``benchmarks/vidur/extract.csv``),
which is what the tests check. ``--write-coefficients`` rewrites
``nightjar/calibration/fitted.py``; ``--write-extract`` rewrites the extract;
``--markdown`` prints docs/profiles.md's fitted-vs-measured tables.

The fit: per GPU, the four GEMM coefficients (plateau efficiency, half-efficiency
token count, weight-read bandwidth efficiency, launch) minimise the mean squared log
error over the four projection GEMMs of every model, token count and TP degree; the
two element-wise coefficients the same over the norms, rotary, activation and residual
add. Rows are weighted so that every power-of-two token bucket counts the same (Vidur
samples large token counts densely; decode lives at small ones). A coordinate search
on multiplicative grids (numpy only, no scipy): deterministic and a few seconds.
Skipped: microsoft/phi-2 (parallel attention and an ungated MLP, not the Llama
shape the roofline prices) and the embedding op (under TP it is a masked
vocab-parallel lookup, several kernels; the roofline prices it as one gather).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import fields, replace
from pathlib import Path
from typing import TypeVar

import numpy as np
import pandas as pd

from nightjar.calibration.ops import (
    ELEMENT_CLASSES,
    ElemFit,
    OpFit,
    elementwise_times_s,
    gemm_times_s,
)

ROOT = Path(__file__).resolve().parents[1]
EXTRACT = ROOT / "benchmarks" / "vidur" / "extract.csv"
COEFFS = ROOT / "nightjar" / "calibration" / "fitted.py"
VIDUR_COMMIT = "7d47513"
# Peak dense bf16 FLOP/s and memory bandwidth the efficiencies are relative to.
# a100 and h100 are the catalogue's SXM entries (nightjar/hardware.py); a40 is NVIDIA's
# A40 datasheet (149.7 TFLOP/s bf16 dense, 696 GB/s). If Vidur's cards were other
# SKUs, the difference is absorbed into the fitted efficiencies.
SPECS = {"a100": (312e12, 2.039e12), "h100": (989.4e12, 3.35e12), "a40": (149.7e12, 696e9)}
GEMMS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")
ELEMS = ("input_layernorm", "post_attention_layernorm", "attn_rope", "mlp_act", "add")
SHAPE = ("n_head", "n_kv_head", "n_embd", "n_expanded_embd", "use_gated_mlp")
EXTRACT_TOKENS = (1, 4, 16, 64, 256, 1024, 4096)
EXTRACT_TP = (1, 2)
DTYPE = 2


def load_vidur(root: Path) -> pd.DataFrame:
    """Every usable row, long format: gpu, model, tokens, tp, shape, op, measured_s."""
    frames = []
    for path in sorted(root.glob("*/*/*/mlp.csv")):
        gpu, org, name = path.parts[-4], path.parts[-3], path.parts[-2]
        if gpu not in SPECS or name == "phi-2":
            continue
        raw = pd.read_csv(path)
        for op in GEMMS + ELEMS:
            part = raw[[*SHAPE, "num_tokens", "num_tensor_parallel_workers"]].copy()
            part["measured_s"] = raw[f"time_stats.{op}.median"] * 1e-3
            part["op"], part["gpu"], part["model"] = op, gpu, f"{org}/{name}"
            frames.append(part)
    if not frames:
        raise SystemExit(f"no Vidur mlp.csv files under {root}")
    df = pd.concat(frames, ignore_index=True)
    df = df.rename(columns={"num_tokens": "tokens", "num_tensor_parallel_workers": "tp"})
    # Vidur repeats a few token counts (2048, 4096); keep one row each.
    return df.drop_duplicates(["gpu", "model", "tokens", "tp", "op"]).reset_index(drop=True)


def load_extract(path: Path = EXTRACT) -> pd.DataFrame:
    return pd.read_csv(path, comment="#")


def write_extract(df: pd.DataFrame, path: Path = EXTRACT) -> None:
    keep = df[df["tokens"].isin(EXTRACT_TOKENS) & df["tp"].isin(EXTRACT_TP)]
    cols = ["gpu", "model", "tp", "tokens", *SHAPE, "op", "measured_s"]
    header = (
        "# Extract of Microsoft Vidur's measured per-layer op times (MIT licence, see LICENSE\n"
        f"# next to this file), github.com/microsoft/vidur commit {VIDUR_COMMIT},\n"
        "# data/profiling/compute/<gpu>/<model>/mlp.csv, column time_stats.<op>.median (ms)\n"
        "# converted to seconds. Token counts and TP degrees subsampled by fit_vidur.py.\n"
    )
    body = keep[cols].sort_values(["gpu", "model", "tp", "tokens", "op"]).to_csv(
        index=False, float_format="%.6g"
    )
    path.write_text(header + body, encoding="utf-8")


ELEM_CLASS = {
    "input_layernorm": "norm", "post_attention_layernorm": "norm", "attn_rope": "rope",
    "mlp_act": "act", "add": "add",
}


def design(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Each row's GEMM shape (tokens, k, n) or element-wise bytes and kernel class."""
    h = df["n_embd"].to_numpy(float)
    heads, kv = df["n_head"].to_numpy(float), df["n_kv_head"].to_numpy(float)
    tp = df["tp"].to_numpy(float)
    hd = h / heads
    inter = df["n_expanded_embd"].to_numpy(float) / tp
    gated = df["use_gated_mlp"].astype(str).str.lower().eq("true").to_numpy()
    op = df["op"].to_numpy()
    t = df["tokens"].to_numpy(float)
    first = [op == "attn_pre_proj", op == "attn_post_proj", op == "mlp_up_proj"]
    k = np.select(first, [h, heads * hd / tp, h], inter)
    n = np.select(first, [(heads + 2 * kv) * hd / tp, h, np.where(gated, 2.0, 1.0) * inter], h)
    cls = np.array([ELEM_CLASS.get(o, "gemm") for o in op])
    # Element-wise bytes: what each kernel reads plus what it writes.
    per_token = np.select(
        [cls == "norm", cls == "rope", cls == "act"],
        [2 * h, 2 * (heads + kv) * hd / tp, np.where(gated, 3.0, 2.0) * inter],
        3 * h,
    )
    return {"t": t, "k": k, "n": n, "nbytes": DTYPE * t * per_token, "cls": cls}


def predict_design(d: dict[str, np.ndarray], fit: OpFit, gpu: str) -> np.ndarray:
    peak, bw = SPECS[gpu]
    out = np.zeros(len(d["t"]))
    g = d["cls"] == "gemm"
    out[g] = gemm_times_s(fit, peak, bw, d["t"][g], d["k"][g], d["n"][g], DTYPE)
    for kind, e in fit.elem.items():
        m = d["cls"] == kind
        out[m] = elementwise_times_s(e, bw, d["nbytes"][m])
    return out


def predict(df: pd.DataFrame, fits: dict[str, OpFit]) -> np.ndarray:
    """The model's time for every row (seconds), with each row's GPU's coefficients."""
    out = np.zeros(len(df))
    for gpu, idx in df.groupby("gpu").indices.items():
        out[idx] = predict_design(design(df.iloc[idx]), fits[str(gpu)], str(gpu))
    return out


def _weights(df: pd.DataFrame) -> np.ndarray:
    bucket = np.floor(np.log2(df["tokens"].to_numpy(float))).astype(int)
    key = pd.Series(list(zip(df["gpu"], df["model"], df["tp"], df["op"], bucket, strict=True)))
    return (1.0 / key.map(key.value_counts())).to_numpy(float)


GEMM_BOUNDS = {
    "gemm_eff_max": (0.05, 1.0), "gemm_tokens_half": (0.01, 4096.0),
    "gemm_mem_eff": (0.2, 1.0), "gemm_launch_s": (0.0, 50e-6),
}
ELEM_BOUNDS = {"mem_eff": (0.05, 1.0), "launch_s": (0.0, 50e-6)}
START = OpFit(0.7, 64.0, 0.8, 3e-6)
ELEM_START = ElemFit(0.6, 3e-6)
T = TypeVar("T", OpFit, ElemFit)


def _search(loss: Callable[[T], float], fit: T, bounds: dict[str, tuple[float, float]]) -> T:
    """Coordinate search: each coefficient over a multiplicative grid, narrowing."""
    best = loss(fit)
    for span in (4.0, 2.0, 1.4, 1.15, 1.05, 1.01):
        for _ in range(6):
            moved = False
            for key, (lo, hi) in bounds.items():
                cur = getattr(fit, key)
                base = cur if cur > 0 else 1e-7
                for f in np.geomspace(1 / span, span, 21):
                    value_f = float(min(hi, max(lo, base * f)))
                    cand = replace(fit, **{key: value_f})  # type: ignore[arg-type]
                    value = loss(cand)
                    if value < best - 1e-15:
                        best, fit, moved = value, cand, True
            if not moved:
                break
    return fit


def fit_gpu(df: pd.DataFrame, gpu: str) -> OpFit:
    rows = df[df["gpu"] == gpu].reset_index(drop=True)
    d, w = design(rows), _weights(rows)
    y = np.log(rows["measured_s"].to_numpy(float))
    peak, bw = SPECS[gpu]
    g = d["cls"] == "gemm"

    def gemm_loss(f: OpFit) -> float:
        pred = gemm_times_s(f, peak, bw, d["t"][g], d["k"][g], d["n"][g], DTYPE)
        return float(np.sum(w[g] * (np.log(pred) - y[g]) ** 2))

    fit = _search(gemm_loss, START, GEMM_BOUNDS)
    elem: dict[str, ElemFit] = {}
    for kind in ELEMENT_CLASSES:
        m = d["cls"] == kind

        def elem_loss(e: ElemFit, m: np.ndarray = m) -> float:
            pred = elementwise_times_s(e, bw, d["nbytes"][m])
            return float(np.sum(w[m] * (np.log(pred) - y[m]) ** 2))

        elem[kind] = _search(elem_loss, ELEM_START, ELEM_BOUNDS)
    return replace(fit, elem=elem)


def errors(df: pd.DataFrame, fits: dict[str, OpFit]) -> pd.DataFrame:
    out = df.copy()
    out["fitted_s"] = predict(df, fits)
    out["error"] = out["fitted_s"] / out["measured_s"] - 1.0
    return out


def summary(err: pd.DataFrame) -> pd.DataFrame:
    """Per GPU: rows, median / p90 / max |error| per op row, and the time-weighted error
    (sum |fitted - measured| / sum measured: what the errors do to a layer's total)."""
    a = err.assign(abs_error=err["error"].abs(), abs_s=(err["fitted_s"] - err["measured_s"]).abs())
    out = a.groupby("gpu")["abs_error"].describe(percentiles=[0.5, 0.9])[
        ["count", "50%", "90%", "max"]
    ]
    sums = a.groupby("gpu")[["abs_s", "measured_s"]].sum()
    out["weighted"] = sums["abs_s"] / sums["measured_s"]
    return out


def write_coefficients(fits: dict[str, OpFit], err: pd.DataFrame, path: Path = COEFFS) -> None:
    stats = summary(err)
    lines = [
        '"""Operator coefficients fitted by ``benchmarks/fit_vidur.py`` (generated; do not edit).',
        "",
        "Fitted to Microsoft Vidur's measured per-layer op times (MIT licence),",
        f"github.com/microsoft/vidur commit {VIDUR_COMMIT}, data/profiling/compute/<gpu>/*/mlp.csv",
        "(six Llama-shaped models, TP 1-8, 1-4096 tokens). Median |error| per op row:",
    ]
    for gpu, row in stats.iterrows():
        lines.append(
            f"{gpu} {row['50%']:.1%}, p90 {row['90%']:.1%} over {int(row['count'])} rows "
            f"(time-weighted {row['weighted']:.1%})."
        )
    lines += ['"""', "", "from nightjar.calibration.ops import ElemFit, OpFit", ""]
    lines += [f'VIDUR_COMMIT = "{VIDUR_COMMIT}"', ""]
    lines.append("FITS: dict[str, OpFit] = {")
    for gpu, f in sorted(fits.items()):
        lines.append(f'    "{gpu}": OpFit(')
        for k in fields(f):
            if k.name != "elem":
                lines.append(f"        {k.name}={getattr(f, k.name):.6g},")
        lines.append("        elem={")
        for kind, e in f.elem.items():
            lines.append(
                f'            "{kind}": '
                f"ElemFit(mem_eff={e.mem_eff:.6g}, launch_s={e.launch_s:.6g}),"
            )
        lines += ["        },", "    ),"]
    lines.append("}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def markdown(err: pd.DataFrame) -> str:
    """docs/profiles.md's tables: a per-op sample and the per-GPU error statistics."""
    out = ["| GPU | model | TP | tokens | op | measured ms | fitted ms | error |",
           "|---|---|---|---|---|---|---|---|"]
    sample = err[
        (err["model"] == "meta-llama/Llama-2-7b-hf")
        & err["tokens"].isin([1, 32, 512, 4096])
        & err["op"].isin(["attn_pre_proj", "mlp_up_proj", "mlp_down_proj", "input_layernorm"])
        & (err["tp"] == 1)
    ].sort_values(["gpu", "model", "tokens", "op"])
    for r in sample.to_dict("records"):
        out.append(
            f"| {r['gpu']} | {str(r['model']).split('/')[1]} | {r['tp']} | {r['tokens']} | "
            f"{r['op']} | {r['measured_s'] * 1e3:.4f} | {r['fitted_s'] * 1e3:.4f} | "
            f"{r['error']:+.1%} |"
        )
    out += ["", "| GPU | op | rows | median abs error | p90 abs error | max abs error |",
            "|---|---|---|---|---|---|"]
    a = err.assign(abs_error=err["error"].abs())
    for (gpu, op), g in a.groupby(["gpu", "op"]):
        q = g["abs_error"]
        out.append(
            f"| {gpu} | {op} | {len(q)} | {q.median():.1%} | {q.quantile(0.9):.1%} | "
            f"{q.max():.1%} |"
        )
    out += ["", "| GPU | rows | median abs error | p90 abs error | time-weighted error |",
            "|---|---|---|---|---|"]
    for gpu, row in summary(err).iterrows():
        out.append(
            f"| {gpu} | {int(row['count'])} | {row['50%']:.1%} | {row['90%']:.1%} | "
            f"{row['weighted']:.1%} |"
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vidur", type=Path, help="Vidur's data/profiling/compute directory")
    ap.add_argument("--write-coefficients", action="store_true")
    ap.add_argument("--write-extract", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args(argv)
    df = load_vidur(args.vidur) if args.vidur else load_extract()
    fits = {gpu: fit_gpu(df, gpu) for gpu in sorted(df["gpu"].unique())}
    err = errors(df, fits)
    for gpu, f in fits.items():
        print(gpu, f)
    print(summary(err).to_string(float_format=lambda x: f"{x:.3f}"))
    if args.write_extract:
        write_extract(df)
    if args.write_coefficients:
        write_coefficients(fits, err)
    if args.markdown:
        print(markdown(errors(load_extract() if args.write_extract else df, fits)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
