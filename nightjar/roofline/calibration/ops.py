"""Per-operator cost model whose coefficients are fitted to measured kernel times.

A GEMM of ``tokens`` rows, ``k`` inputs and ``n`` outputs on one GPU costs

    launch + max(2 tokens k n / (peak * eff(tokens)), bytes / (bandwidth * mem_eff))
    eff(tokens) = eff_max * tokens / (tokens + tokens_half)
    bytes = (k n + tokens (k + n)) * dtype bytes      (weights, input, output)

so a small batch is bound by reading the weights and a large one by compute at an
efficiency that rises with the token count toward a plateau (small-M GEMMs waste
tiles). An element-wise kernel of class ``norm``, ``rope``, ``act`` or ``add`` costs
``launch + bytes / (bandwidth * mem_eff)`` with that class's two coefficients: a norm
reduces in fp32 and reaches a lower fraction of bandwidth than a residual add.
The same functions price the fit (``tools/calibrate/fit_vidur.py``) and the roofline, so
the fit's error is the model's. Arrays in, arrays out: the fit evaluates thousands of
measured rows at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
ELEMENT_CLASSES = ("norm", "rope", "act", "add")


@dataclass(frozen=True, slots=True)
class ElemFit:
    mem_eff: float  # fraction of peak bandwidth the kernel reaches
    launch_s: float  # fixed time per kernel


@dataclass(frozen=True, slots=True)
class OpFit:
    """Fitted operator coefficients of one GPU (times in seconds)."""

    gemm_eff_max: float  # plateau of GEMM compute efficiency (fraction of dense peak)
    gemm_tokens_half: float  # tokens per GPU at which the efficiency is half the plateau
    gemm_mem_eff: float  # fraction of peak bandwidth a weight-bound GEMM reaches
    gemm_launch_s: float  # fixed time per GEMM kernel
    elem: dict[str, ElemFit] = field(default_factory=dict)  # by ELEMENT_CLASSES


def gemm_efficiency(fit: OpFit, tokens: FloatArray) -> FloatArray:
    return fit.gemm_eff_max * tokens / (tokens + fit.gemm_tokens_half)


def gemm_times_s(
    fit: OpFit,
    peak_flops: float,
    bandwidth: float,
    tokens: FloatArray,
    k: FloatArray,
    n: FloatArray,
    dtype_bytes: int = 2,
) -> FloatArray:
    compute = 2.0 * tokens * k * n / (peak_flops * gemm_efficiency(fit, tokens))
    memory = (k * n + tokens * (k + n)) * dtype_bytes / (bandwidth * fit.gemm_mem_eff)
    return fit.gemm_launch_s + np.maximum(compute, memory)


def elementwise_times_s(e: ElemFit, bandwidth: float, nbytes: FloatArray) -> FloatArray:
    return e.launch_s + nbytes / (bandwidth * e.mem_eff)


def gemm_s(
    fit: OpFit,
    peak_flops: float,
    bandwidth: float,
    tokens: float,
    k: float,
    n: float,
    dtype_bytes: int = 2,
) -> float:
    """One GEMM (scalar form of ``gemm_times_s``)."""
    one = np.ones(1)
    return float(
        gemm_times_s(fit, peak_flops, bandwidth, tokens * one, k * one, n * one, dtype_bytes)[0]
    )


def elementwise_s(fit: OpFit, kind: str, bandwidth: float, nbytes: float) -> float:
    return float(elementwise_times_s(fit.elem[kind], bandwidth, np.array([nbytes]))[0])
