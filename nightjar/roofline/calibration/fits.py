"""Which fitted operator coefficients price which GPU, and how a borrowed fit is moved.

Vidur measured A100, H100 and A40. A GPU without its own table takes the nearest
measured one by architecture and memory type. The efficiencies are fractions of each
GPU's own peak FLOP/s and bandwidth, so they carry over as they are; the GEMM
half-efficiency token count ``gemm_tokens_half`` does not. Well below it a GEMM's
compute term is about ``2 k n tokens_half / (peak eff_max)``, a cost that does not
shrink with the token count, and the fit places it under the weight read,
``2 k n / (bandwidth mem_eff)`` (at 0.6-0.8 of it): the three fitted GPUs have
``tokens_half`` at 0.62-0.67 of their ridge point (peak / bandwidth in FLOP per byte:
A100 95 of 153, A40 136 of 215, H100 197 of 295). A borrowed ``tokens_half`` in
tokens keeps the lender's ridge: on a GPU with less compute per byte the compute term
overtakes the weight read even at one token (H200 from H100: 1.13x; an H20-like card,
148 TFLOP/s and 4 TB/s, ridge 37: 6x, so a B = 1 step of an 8B model cost 28.6 ms
where reading its weights takes 4.5 ms). So a borrowed fit's ``tokens_half`` is scaled
by the ratio of the two ridge points, which keeps it the same fraction of the ridge.
Leave-one-GPU-out on Vidur's tables (``tools/calibrate/fit_vidur.py --transfer``,
docs/roofline.md): the scaled rule removes the over-pricing of small GEMMs when a fit
moves to a lower-ridge GPU (H100 -> A100 GEMM p90 29.7% -> 14.8%) and is within two
points of borrowing in the other direction. On measured H200 GEMMs (not used to build
the rule) H100's table ridge-scaled has median / p90 error 6.9% / 34.6% against
16.0% / 57.7% borrowed. A GPU's own fit is used unscaled.
"""

from __future__ import annotations

from dataclasses import replace

from nightjar.roofline.calibration.fitted import FIT_SPECS, FITS
from nightjar.roofline.calibration.ops import OpFit
from nightjar.roofline.hardware import GPU

# Hopper and Blackwell HBM parts -> h100; Ada GDDR parts -> a40 (Ampere GA102, GDDR6).
# A GPU whose catalogue name is itself a fitted table (e.g. a measured "h200") uses it.
FIT_FOR_GPU: dict[str, str] = {
    "a100-80gb": "a100",
    "h100-80gb": "h100",
    "h200": "h100",
    "b200": "h100",
    "rtx4090": "a40",
    "l40s": "a40",
}
DEFAULT_FIT = "a100"


def fit_name(gpu_name: str) -> str:
    name = gpu_name.lower()
    return name if name in FITS else FIT_FOR_GPU.get(name, DEFAULT_FIT)


def get_fit(name: str) -> OpFit:
    return FITS[name]


def ridge_scaled(fit: OpFit, fitted_ridge: float, ridge: float) -> OpFit:
    """``fit`` moved from a GPU of ridge point ``fitted_ridge`` to one of ``ridge``
    (FLOP per byte): ``gemm_tokens_half`` keeps its fraction of the ridge."""
    return replace(fit, gemm_tokens_half=fit.gemm_tokens_half * ridge / fitted_ridge)


def fit_ridge(name: str) -> float:
    """The ridge point (FLOP per byte) of the GPU the table ``name`` was fitted on."""
    peak, bandwidth = FIT_SPECS[name]
    return peak / bandwidth


def fit_for(name: str, gpu: GPU) -> OpFit:
    """Table ``name``'s coefficients as they price ``gpu``: ridge-scaled ``tokens_half``."""
    return ridge_scaled(FITS[name], fit_ridge(name), gpu.peak_flops / gpu.mem_bandwidth_bytes_per_s)
