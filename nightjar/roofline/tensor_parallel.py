"""Tensor parallelism for the roofline: one rank's share of a model and its all-reduces.

vLLM's Megatron-style tensor parallelism splits every attention layer by heads and
every MLP by its intermediate dimension over ``tp`` GPUs; the embedding and LM head
are split by vocabulary rows; the two RMSNorm weights of each layer are replicated.
KV heads are split too, or replicated when there are fewer KV heads than ranks (each
rank then keeps one). A rank's forward is the whole forward on that smaller shape,
plus two all-reduces of the hidden state per layer (after attention's output
projection and after the MLP's down projection), each over ``tokens * hidden``
activations in the model's dtype.

The draft runs with the target's ``tp`` (vLLM's draft-model proposer shares the
target's workers; ``draft_tensor_parallel_size`` defaults to the target's), so its
layers pay the same two all-reduces: for a small draft those are latency-bound and
can cost as much as its GEMMs.

All-reduce time ``latency + bytes / algbw`` comes from Microsoft Vidur's NCCL
measurements on NVSwitch nodes where they exist (A100 and H100 at 2, 4 and 8 GPUs;
MIT licence, github.com/microsoft/vidur commit 7d47513, ``data/profiling/network/
{a100,h100}_dgx/all_reduce.csv``). ``tools/calibrate/fit_all_reduce.py`` derives the binned
table in ``tools/calibrate/vidur/all_reduce.csv`` and fits it: latency = the median time
of messages up to 1 MiB, algbw = the median ``bytes / (time - latency)`` over
messages from 8 MiB. Other GPUs use a bus-bandwidth model: a ring all-reduce moves
``2 (n - 1) / n`` of the buffer over each GPU's link, at the H100 fit's efficiency
(achieved bus bandwidth over NVLink's per-direction rate) for NVLink cards, at the
host-link rate for PCIe cards, with the H100 fit's latency.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.roofline.hardware import GPU, ModelArch

MAX_TP = 8  # one node's GPUs: across nodes the all-reduce is a different network

# (table, GPUs) -> (latency s, algorithm bandwidth bytes/s); from
# `python tools/calibrate/fit_all_reduce.py fit tools/calibrate/vidur/all_reduce.csv`.
ALL_REDUCE_FIT: dict[tuple[str, int], tuple[float, float]] = {
    ("a100", 2): (49.5e-6, 176.7e9),  # median |err| 7%, worst +395% (a 7 us bin)
    ("a100", 4): (31.8e-6, 112.3e9),  # median |err| 18%, worst +99%
    ("a100", 8): (37.5e-6, 87.1e9),  # median |err| 17%, worst +50%
    ("h100", 2): (31.5e-6, 332.2e9),  # median |err| 16%, worst +350% (a 7 us bin)
    ("h100", 4): (39.8e-6, 264.5e9),  # median |err| 5%, worst +38%
    ("h100", 8): (32.2e-6, 205.6e9),  # median |err| 5%, worst +40%
}
# NVLink 4 per-direction rate of the H100 the fit was measured on.
H100_NVLINK_BYTES_PER_S = 450e9


def ring_factor(n: int) -> float:
    return 2.0 * (n - 1) / n


def _nearest_measured(n: int) -> int:
    return min((2, 4, 8), key=lambda m: (abs(m - n), -m))


def all_reduce_s(gpu: GPU, n: int, nbytes: float) -> float:
    """One all-reduce of ``nbytes`` over ``n`` GPUs of this kind in one node."""
    if n <= 1:
        return 0.0
    fit = ALL_REDUCE_FIT.get((gpu.all_reduce_table or "", n))
    if fit is not None:
        latency, algbw = fit
        return latency + nbytes / algbw
    latency, h100_algbw = ALL_REDUCE_FIT[("h100", _nearest_measured(n))]
    m = _nearest_measured(n)
    if gpu.nvlink_bytes_per_s > 0:
        efficiency = h100_algbw * ring_factor(m) / H100_NVLINK_BYTES_PER_S
        bus = efficiency * gpu.nvlink_bytes_per_s
    else:
        bus = gpu.host_link_bytes_per_s
    return latency + ring_factor(n) * nbytes / bus


def comm_s(gpu: GPU, m: ModelArch, tokens: int) -> float:
    """The two all-reduces per layer of one forward over ``tokens`` tokens on shard ``m``."""
    if m.tp <= 1:
        return 0.0
    return 2 * m.layers * all_reduce_s(gpu, m.tp, tokens * m.hidden * m.dtype_bytes)


def check_tp(m: ModelArch, tp: int) -> None:
    """vLLM's constraints: heads split evenly; KV heads split or replicated evenly."""
    if not 1 <= tp <= MAX_TP:
        raise NightjarInputError(f"--tp must be 1..{MAX_TP} (GPUs of one node), got {tp}")
    if m.heads % tp:
        raise NightjarInputError(
            f"--tp {tp} does not divide {m.name}'s {m.heads} attention heads"
        )
    if m.kv_heads % tp and tp % m.kv_heads:
        raise NightjarInputError(
            f"--tp {tp} neither divides nor is a multiple of {m.name}'s {m.kv_heads} KV heads"
        )


def shard(m: ModelArch, tp: int) -> ModelArch:
    """One rank's share of ``m`` under ``tp``-way tensor parallelism (``m`` at tp 1)."""
    check_tp(m, tp)
    if tp == 1:
        return m
    kv_heads = max(1, m.kv_heads // tp)
    heads = m.heads // tp
    inter = m.intermediate // tp
    d, h = m.head_dim, m.hidden
    full = m.derived_params()
    replicated = (2 * m.layers + 1) * h  # RMSNorm weights
    attn = h * heads * d * 2 + 2 * h * kv_heads * d
    bias = (heads + 2 * kv_heads) * d if m.qkv_bias else 0
    per_layer = attn + bias + 3 * h * inter
    embed = replace(m, tp=tp).vocab_rows * h * (1 if m.tied_embeddings else 2)
    # The published count can differ from the shape's by a few rows (padding); keep
    # that difference, split like the rest.
    params = m.layers * per_layer + embed + replicated + (m.params - full) // tp
    return replace(
        m, heads=heads, kv_heads=kv_heads, intermediate=inter, params=params, tp=tp
    )


def tp_metadata(gpu: GPU, target_shard: ModelArch, tp: int) -> dict[str, Any]:
    """What a TP profile records about its all-reduces (nothing at tp 1)."""
    if tp <= 1:
        return {}
    measured = (gpu.all_reduce_table or "", tp) in ALL_REDUCE_FIT
    one_token = all_reduce_s(gpu, tp, target_shard.hidden * target_shard.dtype_bytes)
    return {
        "tensor_parallel": tp,
        "all_reduce_model": (
            f"Vidur {gpu.all_reduce_table} NVSwitch measurements (fit)" if measured
            else "bus-bandwidth model (nightjar.roofline.tensor_parallel)"
        ),
        "target_all_reduce_us_per_layer_one_token": round(2e6 * one_token, 3),
    }
