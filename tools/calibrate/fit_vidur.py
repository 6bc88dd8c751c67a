"""Fit the roofline's operator coefficients to Vidur's measured per-layer op times.

Source: Microsoft Vidur (MIT licence), github.com/microsoft/vidur at commit 7d47513,
``data/profiling/compute/{a100,h100,a40}/<org>/<model>/mlp.csv``: CUDA-timed median
times (ms) of every linear and element-wise op of one decoder layer, by token count
and tensor-parallel degree.

    python tools/calibrate/fit_vidur.py --vidur /tmp/vidur/data/profiling/compute \
        [--extra MEASURED.csv ...] [--write-coefficients] [--write-extract] [--markdown] \
        [--transfer]

Without ``--vidur`` it fits the committed extract (``tools/calibrate/vidur/extract.csv``),
which is what the tests check. ``--extra`` adds measured rows in the extract's format
(``gpu,model,tp,tokens,n_head,n_kv_head,n_embd,n_expanded_embd,use_gated_mlp,op,
measured_s``), e.g. another GPU's own op timings; a GPU Vidur did not measure takes its
peak and bandwidth from the catalogue (``nightjar.roofline.hardware``) and gets its own fit.
``--write-coefficients`` rewrites ``nightjar/roofline/calibration/fitted.py``;
``--write-extract`` rewrites the extract (Vidur rows only); ``--markdown`` prints
docs/profiles.md's fitted-vs-measured tables; ``--transfer`` prints the
leave-one-GPU-out table: fitted on GPU X, X's coefficients predict GPU Y's rows, with
X's ``gemm_tokens_half`` as it is (``borrowed``, the old rule), scaled by the ridge
ratio (``ridge``, the roofline's rule, ``nightjar.roofline.calibration.fits``), or set to Y's
ridge times the mean fraction of the ridge over the fitted GPUs other than Y
(``pooled``); ``own`` rows (Y's own fit) are the floor. The extract's seven token counts pin
``gemm_tokens_half`` loosely (a refit on it gives 38 / 72 / 88 tokens against 95 / 136 /
197 on all rows), so ``--transfer --committed`` on the extract uses the committed
coefficients: the table the tests bound.

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

from nightjar.roofline.calibration.fits import DEFAULT_FIT, FIT_FOR_GPU, ridge_scaled
from nightjar.roofline.calibration.fitted import FITS
from nightjar.roofline.calibration.ops import (
    ELEMENT_CLASSES,
    ElemFit,
    OpFit,
    elementwise_times_s,
    gemm_times_s,
)
from nightjar.roofline.hardware import GPUS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]  # the repository
EXTRACT = HERE / "vidur" / "extract.csv"
COEFFS = ROOT / "nightjar" / "roofline" / "calibration" / "fitted.py"
VIDUR_COMMIT = "7d47513"
# Peak dense bf16 FLOP/s and memory bandwidth the efficiencies are relative to.
# a100 and h100 are the catalogue's SXM entries (nightjar/roofline/hardware.py); a40 is NVIDIA's
# A40 datasheet (149.7 TFLOP/s bf16 dense, 696 GB/s). If Vidur's cards were other
# SKUs, the difference is absorbed into the fitted efficiencies.
SPECS = {"a100": (312e12, 2.039e12), "h100": (989.4e12, 3.35e12), "a40": (149.7e12, 696e9)}
COLUMNS = ("gpu", "model", "tp", "tokens", "n_head", "n_kv_head", "n_embd",
           "n_expanded_embd", "use_gated_mlp", "op", "measured_s")
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


def gpu_spec(gpu: str) -> tuple[float, float]:
    """Peak FLOP/s and bandwidth of a GPU in the data: Vidur's three, else the catalogue's."""
    if gpu in SPECS:
        return SPECS[gpu]
    if gpu in GPUS:
        return GPUS[gpu].peak_flops, GPUS[gpu].mem_bandwidth_bytes_per_s
    known = ", ".join(sorted({*SPECS, *GPUS}))
    raise SystemExit(f"gpu {gpu!r} has no peak FLOP/s and bandwidth (known: {known})")


def ridge(gpu: str) -> float:
    peak, bw = gpu_spec(gpu)
    return peak / bw


def load_measured(path: Path) -> pd.DataFrame:
    """Extra measured rows in the extract's format, checked: one line and exit on bad input."""
    try:
        df = pd.read_csv(path, comment="#")
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--extra {path}: cannot read: {exc}") from None
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise SystemExit(f"--extra {path}: missing columns {', '.join(missing)}")
    # Ops the roofline does not price from this table (attention, embedding, ...) are
    # left out, and said so.
    unknown = sorted(set(df["op"].astype(str)) - set(GEMMS) - set(ELEMS))
    if unknown:
        print(f"--extra {path}: leaving out ops {', '.join(unknown)} (not fitted)",
              file=sys.stderr)
        df = df[df["op"].isin(GEMMS + ELEMS)]
    if df.empty:
        raise SystemExit(f"--extra {path}: no rows of the ops fitted ({', '.join(GEMMS + ELEMS)})")
    df = df[list(COLUMNS)].copy()
    df["use_gated_mlp"] = df["use_gated_mlp"].astype(str).str.lower().isin(["true", "1", "yes"])
    df["gpu"] = df["gpu"].astype(str).str.lower()
    bad = df["measured_s"].isna() | ~(df["measured_s"] > 0) | ~(df["tokens"] > 0)
    if bad.any():
        raise SystemExit(f"--extra {path}: {int(bad.sum())} rows without a positive time or "
                         "token count")
    for gpu in df["gpu"].unique():
        gpu_spec(str(gpu))
    return df


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
    peak, bw = gpu_spec(gpu)
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


def fit_gpu(df: pd.DataFrame, gpu: str, fallback: OpFit | None = None) -> OpFit:
    """``fallback``: where an element-wise class without rows takes its coefficients
    from (extra measured files may hold only some ops); without one that is an error."""
    rows = df[df["gpu"] == gpu].reset_index(drop=True)
    d, w = design(rows), _weights(rows)
    y = np.log(rows["measured_s"].to_numpy(float))
    peak, bw = gpu_spec(gpu)
    g = d["cls"] == "gemm"
    if not g.any():
        raise SystemExit(f"{gpu}: no GEMM rows ({', '.join(GEMMS)}) to fit")

    def gemm_loss(f: OpFit) -> float:
        pred = gemm_times_s(f, peak, bw, d["t"][g], d["k"][g], d["n"][g], DTYPE)
        return float(np.sum(w[g] * (np.log(pred) - y[g]) ** 2))

    fit = _search(gemm_loss, START, GEMM_BOUNDS)
    elem: dict[str, ElemFit] = {}
    for kind in ELEMENT_CLASSES:
        m = d["cls"] == kind
        if not m.any():
            if fallback is None:
                raise SystemExit(f"{gpu}: no {kind} rows and no fit to take them from")
            elem[kind] = fallback.elem[kind]
            continue

        def elem_loss(e: ElemFit, m: np.ndarray = m) -> float:
            pred = elementwise_times_s(e, bw, d["nbytes"][m])
            return float(np.sum(w[m] * (np.log(pred) - y[m]) ** 2))

        elem[kind] = _search(elem_loss, ELEM_START, ELEM_BOUNDS)
    return replace(fit, elem=elem)


def fit_all(df: pd.DataFrame) -> tuple[dict[str, OpFit], dict[str, str]]:
    """Every GPU's fit, and for each GPU whose rows lack some element-wise class, a note
    naming the classes taken from the fit it would otherwise borrow (fits.py)."""
    present = df.assign(cls=design(df)["cls"]).groupby("gpu")["cls"].agg(set)
    complete = [g for g in sorted(present.index) if set(ELEMENT_CLASSES) <= present[g]]
    fits = {str(g): fit_gpu(df, str(g)) for g in complete}
    notes: dict[str, str] = {}
    for gpu in sorted(set(present.index) - set(complete)):
        lender = FIT_FOR_GPU.get(str(gpu), DEFAULT_FIT)
        if lender not in fits:
            raise SystemExit(f"{gpu}: some element-wise ops have no rows, and no {lender} "
                             "rows to take them from")
        fits[str(gpu)] = fit_gpu(df, str(gpu), fallback=fits[lender])
        missing = [k for k in ELEMENT_CLASSES if k not in present[gpu]]
        notes[str(gpu)] = f"{', '.join(missing)} coefficients taken from {lender} (no rows)"
    return dict(sorted(fits.items())), notes


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


def _shown(path: Path) -> str:
    """A measured file's name as the generated docstring gives it (repo-relative)."""
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return path.name


def write_coefficients(
    fits: dict[str, OpFit],
    err: pd.DataFrame,
    path: Path | None = None,
    extra: dict[str, list[str]] | None = None,
    notes: dict[str, str] | None = None,
) -> None:
    """``extra``: GPU -> the measured files (``--extra``) its rows came from; ``notes``:
    GPU -> what of its fit was not fitted to its own rows (``fit_all``)."""
    path = path or COEFFS
    stats = summary(err)
    lines = [
        '"""Operator coefficients fitted by ``tools/calibrate/fit_vidur.py``'
        " (generated; do not edit).",
        "",
        "Fitted to Microsoft Vidur's measured per-layer op times (MIT licence),",
        f"github.com/microsoft/vidur commit {VIDUR_COMMIT}, data/profiling/compute/<gpu>/*/mlp.csv",
        "(six Llama-shaped models, TP 1-8, 1-4096 tokens).",
    ]
    for gpu, files in sorted((extra or {}).items()):
        lines.append(f"{gpu}: measured rows from {', '.join(files)} (not Vidur's; method in")
        lines.append("    its folder's README.md).")
    for gpu, note in sorted((notes or {}).items()):
        lines.append(f"{gpu}: {note}.")
    lines.append("Median |error| per op row:")
    for gpu, row in stats.iterrows():
        lines.append(
            f"{gpu} {row['50%']:.1%}, p90 {row['90%']:.1%} over {int(row['count'])} rows "
            f"(time-weighted {row['weighted']:.1%})."
        )
    lines += ['"""', "", "from nightjar.roofline.calibration.ops import ElemFit, OpFit", ""]
    lines += [f'VIDUR_COMMIT = "{VIDUR_COMMIT}"', ""]
    lines += [
        "# Peak dense bf16 FLOP/s and memory bandwidth (bytes/s) each table's efficiencies are",
        "# fractions of; their ratio, the ridge point, scales a borrowed fit (fits.py).",
        "FIT_SPECS: dict[str, tuple[float, float]] = {",
        *(f'    "{g}": ({gpu_spec(g)[0]:.6g}, {gpu_spec(g)[1]:.6g}),' for g in sorted(fits)),
        "}",
        "",
    ]
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


VARIANTS = ("borrowed", "ridge", "pooled")


def transferred(fits: dict[str, OpFit], src: str, dst: str, variant: str) -> OpFit:
    """GPU ``src``'s fit as it prices GPU ``dst`` under one rule (see the docstring)."""
    fit = fits[src]
    if variant == "borrowed":
        return fit
    if variant == "ridge":
        return ridge_scaled(fit, ridge(src), ridge(dst))
    others = [f.gemm_tokens_half / ridge(g) for g, f in fits.items() if g != dst]
    return replace(fit, gemm_tokens_half=float(np.mean(others)) * ridge(dst))


def _stats(measured: np.ndarray, fitted: np.ndarray) -> tuple[float, float, float]:
    """Median and p90 |error| per row, and the time-weighted error."""
    e = np.abs(fitted / measured - 1.0)
    weighted = float(np.abs(fitted - measured).sum() / measured.sum())
    return float(np.median(e)), float(np.quantile(e, 0.9)), weighted


def transfer_table(df: pd.DataFrame, fits: dict[str, OpFit]) -> pd.DataFrame:
    """Leave-one-GPU-out: every fitted GPU X predicts every other GPU Y's rows under each
    rule, plus Y's own fit. Errors for the GEMMs alone and for all ops."""
    out = []
    for dst in sorted(df["gpu"].unique()):
        rows = df[df["gpu"] == dst].reset_index(drop=True)
        d = design(rows)
        y = rows["measured_s"].to_numpy(float)
        g = d["cls"] == "gemm"
        cases = [(dst, "own")] if dst in fits else []
        cases += [(src, v) for src in sorted(fits) if src != dst for v in VARIANTS]
        for src, variant in cases:
            fit = fits[dst] if variant == "own" else transferred(fits, src, dst, variant)
            pred = predict_design(d, fit, dst)
            out.append({
                "fit_on": src, "predict": dst, "variant": variant,
                "ridge_ratio": ridge(dst) / ridge(src), "tokens_half": fit.gemm_tokens_half,
                "rows": len(rows), "gemm_rows": int(g.sum()),
                **dict(zip(("gemm_median", "gemm_p90", "gemm_weighted"),
                           _stats(y[g], pred[g]), strict=True)),
                **dict(zip(("all_median", "all_p90", "all_weighted"),
                           _stats(y, pred), strict=True)),
            })
    return pd.DataFrame(out)


def transfer_markdown(table: pd.DataFrame) -> str:
    pct = ("gemm_median", "gemm_p90", "gemm_weighted", "all_median", "all_p90", "all_weighted")
    out = ["| fit on | predict | ridge ratio | rule | tokens_half | GEMM median | GEMM p90 | "
           "GEMM time-weighted | all median | all p90 | all time-weighted |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in table.to_dict("records"):
        cells = " | ".join(f"{r[k]:.1%}" for k in pct)
        out.append(f"| {r['fit_on']} | {r['predict']} | {r['ridge_ratio']:.2f} | "
                   f"{r['variant']} | {r['tokens_half']:.0f} | {cells} |")
    pairs = table[table["variant"] != "own"]
    if len(pairs):
        out += ["", "| rule | pairs | " + " | ".join(f"mean {k.replace('_', ' ')}" for k in pct)
                + " |", "|---|---|" + "---|" * len(pct)]
        for variant in VARIANTS:
            v = pairs[pairs["variant"] == variant]
            out.append(f"| {variant} | {len(v)} | "
                       + " | ".join(f"{v[k].mean():.1%}" for k in pct) + " |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vidur", type=Path, help="Vidur's data/profiling/compute directory")
    ap.add_argument("--write-coefficients", action="store_true")
    ap.add_argument("--write-extract", action="store_true")
    ap.add_argument("--markdown", action="store_true")
    ap.add_argument("--extra", type=Path, action="append", default=[], metavar="CSV",
                    help="more measured rows in the extract's format (repeatable)")
    ap.add_argument("--transfer", action="store_true",
                    help="print the leave-one-GPU-out table (borrowed vs ridge-scaled)")
    ap.add_argument("--committed", action="store_true",
                    help="with --transfer: the package's committed coefficients (fitted to "
                    "all of Vidur's rows) for the GPUs that have them, not a refit")
    args = ap.parse_args(argv)
    vidur = load_vidur(args.vidur) if args.vidur else load_extract()
    extra_files: dict[str, list[str]] = {}
    frames = [vidur]
    for path in args.extra:
        more = load_measured(path)
        for gpu in sorted(more["gpu"].unique()):
            extra_files.setdefault(str(gpu), []).append(_shown(path))
        frames.append(more)
    df = pd.concat(frames, ignore_index=True) if args.extra else vidur
    df = df.drop_duplicates(["gpu", "model", "tokens", "tp", "op"], keep="last")
    df = df.reset_index(drop=True)
    fits, notes = fit_all(df)
    for gpu, note in notes.items():
        print(f"{gpu}: {note}", file=sys.stderr)
    err = errors(df, fits)
    for gpu, f in fits.items():
        print(gpu, f)
    print(summary(err).to_string(float_format=lambda x: f"{x:.3f}"))
    if args.write_extract:
        write_extract(vidur)
    if args.write_coefficients:
        write_coefficients(fits, err, extra=extra_files, notes=notes)
    if args.markdown:
        print(markdown(errors(load_extract() if args.write_extract else df, fits)))
    if args.transfer:
        print(transfer_markdown(transfer_table(df, {**fits, **FITS} if args.committed else fits)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
