"""Which fitted operator coefficients price which catalogue GPU.

Vidur measured A100, H100 and A40. A GPU without its own table takes the nearest
measured one by architecture and memory type; the efficiencies are fractions of each
GPU's own peak, so the borrowed curve is scaled by the GPU's own specifications.
"""

from __future__ import annotations

from nightjar.calibration.fitted import FITS
from nightjar.calibration.ops import OpFit

# Hopper and Blackwell HBM parts -> h100; Ada GDDR parts -> a40 (Ampere GA102, GDDR6).
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
    return FIT_FOR_GPU.get(gpu_name.lower(), DEFAULT_FIT)


def get_fit(name: str) -> OpFit:
    return FITS[name]
