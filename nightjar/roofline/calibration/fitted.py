"""Operator coefficients fitted by ``tools/calibrate/fit_vidur.py`` (generated; do not edit).

Fitted to Microsoft Vidur's measured per-layer op times (MIT licence),
github.com/microsoft/vidur commit 7d47513, data/profiling/compute/<gpu>/*/mlp.csv
(six Llama-shaped models, TP 1-8, 1-4096 tokens).
h200: measured rows from tools/calibrate/measured/h200/ops.csv (not Vidur's; method in
    its folder's README.md).
h200: norm, rope, act coefficients taken from h100 (no rows).
Median |error| per op row:
a100 8.4%, p90 25.2% over 79092 rows (time-weighted 4.1%).
a40 8.8%, p90 22.5% over 46620 rows (time-weighted 6.7%).
h100 10.3%, p90 27.8% over 46620 rows (time-weighted 7.2%).
h200 4.9%, p90 11.3% over 910 rows (time-weighted 5.9%).
"""

from nightjar.roofline.calibration.ops import ElemFit, OpFit

VIDUR_COMMIT = "7d47513"

# Peak dense bf16 FLOP/s and memory bandwidth (bytes/s) each table's efficiencies are
# fractions of; their ratio, the ridge point, scales a borrowed fit (fits.py).
FIT_SPECS: dict[str, tuple[float, float]] = {
    "a100": (3.12e+14, 2.039e+12),
    "a40": (1.497e+14, 6.96e+11),
    "h100": (9.894e+14, 3.35e+12),
    "h200": (9.895e+14, 4.8e+12),
}

FITS: dict[str, OpFit] = {
    "a100": OpFit(
        gemm_eff_max=0.74659,
        gemm_tokens_half=94.8249,
        gemm_mem_eff=0.789682,
        gemm_launch_s=5.28408e-06,
        elem={
            "norm": ElemFit(mem_eff=0.415586, launch_s=5.08023e-06),
            "rope": ElemFit(mem_eff=0.46934, launch_s=3.42932e-06),
            "act": ElemFit(mem_eff=0.520824, launch_s=4.87351e-06),
            "add": ElemFit(mem_eff=1, launch_s=1.79078e-06),
        },
    ),
    "a40": OpFit(
        gemm_eff_max=0.792258,
        gemm_tokens_half=135.711,
        gemm_mem_eff=0.765075,
        gemm_launch_s=3.33018e-06,
        elem={
            "norm": ElemFit(mem_eff=0.681007, launch_s=4.30586e-06),
            "rope": ElemFit(mem_eff=0.914788, launch_s=2.60905e-06),
            "act": ElemFit(mem_eff=0.837584, launch_s=3.16155e-06),
            "add": ElemFit(mem_eff=1, launch_s=9.33653e-07),
        },
    ),
    "h100": OpFit(
        gemm_eff_max=0.76282,
        gemm_tokens_half=196.991,
        gemm_mem_eff=0.894863,
        gemm_launch_s=4.54401e-06,
        elem={
            "norm": ElemFit(mem_eff=0.452052, launch_s=4.51602e-06),
            "rope": ElemFit(mem_eff=0.54128, launch_s=2.6852e-06),
            "act": ElemFit(mem_eff=0.60905, launch_s=3.4225e-06),
            "add": ElemFit(mem_eff=1, launch_s=1.26753e-06),
        },
    ),
    "h200": OpFit(
        gemm_eff_max=0.736961,
        gemm_tokens_half=1.26745,
        gemm_mem_eff=0.857419,
        gemm_launch_s=4.30158e-06,
        elem={
            "norm": ElemFit(mem_eff=0.452052, launch_s=4.51602e-06),
            "rope": ElemFit(mem_eff=0.54128, launch_s=2.6852e-06),
            "act": ElemFit(mem_eff=0.60905, launch_s=3.4225e-06),
            "add": ElemFit(mem_eff=0.853593, launch_s=1.62397e-06),
        },
    ),
}
