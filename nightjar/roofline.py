"""An analytic roofline model that generates a profile for a GPU and a model pair.

One forward pass over ``T`` tokens of ``B`` sequences at context ``c`` costs

    t = overhead + roof(linear) + roof(attention)
    roof(x) = max(FLOPs_x / (peak * eff_c), bytes_x / (mem_bw * eff_m))
    linear:    FLOPs = 2 * params * T,      bytes = weight bytes
    attention: FLOPs = 4 * L * H * d * c * T, bytes = B * c * KV bytes per token
    overhead = forward_overhead + layers * layer_overhead

This is the brief's ``overhead + max(FLOPs, bytes)`` roofline applied per kernel
class and summed, because GEMMs and attention are separate kernels that run one
after the other: a single max over the totals would hide the KV read behind the
GEMMs' compute, which no real kernel does.

A decode step with speculation length gamma:

* verify = one target forward over ``T = B * (gamma + 1)`` tokens;
* draft = gamma sequential draft forwards over ``B`` tokens, the first over ``2B``:
  it also writes the draft KV of the previous step's last proposal and the bonus
  token (vLLM folds that catch-up into the first pass; charging both tokens is an
  upper bound, exact when every draft was accepted); gamma = 0 has no draft time;
* step = draft + verify + step_overhead (+ spec_overhead when gamma > 0: rejection
  sampling and proposal bookkeeping).

Prefill of ``n`` tokens = one forward over a single sequence of ``n`` tokens with
causal attention (``n (n + 1) / 2`` query-key pairs) at the prefill compute
efficiency. The efficiencies are end-to-end serving numbers, not kernel peaks: with
``compute_efficiency = 0.35`` an A100 decodes vicuna-13b at about 3.3k tokens/s at
B = 256 and context 128, and a B = 1 step takes 16.6 ms (weights over 85% of HBM
bandwidth plus overheads), both in the range vLLM reports for 13B models.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from nightjar.hardware import GPU, ModelArch, check_same_vocab, get_gpu, get_model
from nightjar.tensor_parallel import comm_s, shard, tp_metadata

BATCH_GRID = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)
GAMMA_GRID = tuple(range(9))
# 0 (weights only) and the long contexts of reasoning models extend the brief's grid.
CONTEXT_GRID = (0, 128, 512, 1024, 2048, 4096, 8192, 16384, 32768)
PREFILL_GRID = (1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536)

# Assumed acceptance priors (mean, Beta concentration) per workload; not measured.
ACCEPTANCE_PRIORS: dict[tuple[str, str], dict[str, tuple[float, float]]] = {
    ("vicuna-13b", "vicuna-68m"): {
        "sharegpt": (0.60, 8.0),
        "alpaca": (0.65, 8.0),
        "specbench": (0.55, 8.0),
    },
    ("deepseek-r1-distill-qwen-7b", "qwen2.5-0.5b"): {
        "sharegpt": (0.55, 8.0),
        "alpaca": (0.60, 8.0),
        "specbench": (0.50, 8.0),
    },
    # The 7B distill's priors: same draft, same family, a larger target.
    ("deepseek-r1-distill-qwen-32b", "qwen2.5-0.5b"): {
        "sharegpt": (0.55, 8.0),
        "alpaca": (0.60, 8.0),
        "specbench": (0.50, 8.0),
    },
    ("llama-3.1-8b", "llama-3.2-1b"): {
        "sharegpt": (0.70, 8.0),
        "alpaca": (0.75, 8.0),
        "specbench": (0.65, 8.0),
    },
}


@dataclass(frozen=True, slots=True)
class RooflineParams:
    compute_efficiency: float = 0.35  # decode/verify: small-M GEMMs plus non-GEMM kernels
    prefill_compute_efficiency: float = 0.75  # large-M GEMMs
    memory_efficiency: float = 0.85
    forward_overhead_s: float = 200e-6  # launch and input preparation per forward
    layer_overhead_s: float = 8e-6  # per layer per forward: launches that do not overlap
    step_overhead_s: float = 1.0e-3  # scheduler, sampling, output processing per step
    spec_overhead_s: float = 0.3e-3  # rejection sampler and proposer bookkeeping
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    # vLLM profiles activations with a full token budget and sampler batch.
    profile_tokens: int = 8192
    profile_seqs: int = 256
    non_torch_bytes: int = 512 << 20  # CUDA context, cuBLAS workspaces


def forward_s(
    gpu: GPU,
    m: ModelArch,
    p: RooflineParams,
    *,
    tokens: int,
    seqs: int,
    context: float,
    attn_pairs: float | None = None,
    eff_c: float | None = None,
) -> float:
    """One forward pass; ``attn_pairs`` (query-key pairs) defaults to tokens * context."""
    peak = gpu.peak_flops * (p.compute_efficiency if eff_c is None else eff_c)
    bw = gpu.mem_bandwidth_bytes_per_s * p.memory_efficiency
    pairs = tokens * context if attn_pairs is None else attn_pairs
    linear = max(2.0 * m.params * tokens / peak, m.weight_bytes / bw)
    attention = max(
        m.attention_flops_per_token_per_ctx * pairs / peak,
        seqs * context * m.kv_bytes_per_token / bw,
    )
    overhead = p.forward_overhead_s + m.layers * p.layer_overhead_s
    return overhead + linear + attention + comm_s(gpu, m, tokens)


def draft_s(gpu: GPU, d: ModelArch, p: RooflineParams, b: int, gamma: int, ctx: float) -> float:
    if gamma == 0:
        return 0.0
    first = forward_s(gpu, d, p, tokens=2 * b, seqs=b, context=ctx)
    rest = forward_s(gpu, d, p, tokens=b, seqs=b, context=ctx)
    return first + (gamma - 1) * rest


def verify_s(gpu: GPU, t: ModelArch, p: RooflineParams, b: int, gamma: int, ctx: float) -> float:
    return forward_s(gpu, t, p, tokens=b * (gamma + 1), seqs=b, context=ctx)


def prefill_s(gpu: GPU, m: ModelArch, p: RooflineParams, n: int) -> float:
    # A single sequence: the KV it writes is read back once by its own attention.
    return forward_s(
        gpu,
        m,
        p,
        tokens=n,
        seqs=1,
        context=n,
        attn_pairs=n * (n + 1) / 2,
        eff_c=p.prefill_compute_efficiency,
    )


def estimate_activation_reserve(t: ModelArch, p: RooflineParams) -> int:
    """What vLLM's memory profiling leaves aside: activations of a full-budget forward
    (hidden-sized and MLP-sized buffers), fp32 logits and probabilities for the
    sampler batch, and non-torch memory. An estimate; a measured profile replaces it.
    """
    act = p.profile_tokens * (4 * t.hidden + 3 * t.intermediate) * t.dtype_bytes
    sampler = p.profile_seqs * t.vocab * 4 * 2
    return act + sampler + p.non_torch_bytes


def _ms(x: float) -> float:
    return round(x * 1e3, 5)


# ``--enforce-eager``: without CUDA graphs every kernel is launched from the host.
# A decoder layer runs ~10 kernels at ~3-4 us of launch each, and the forward's
# input preparation is no longer captured: assumed, not measured.
EAGER_LAYER_OVERHEAD_S = 30e-6
EAGER_FORWARD_OVERHEAD_S = 400e-6


def eager_params(p: RooflineParams) -> RooflineParams:
    return replace(
        p, layer_overhead_s=EAGER_LAYER_OVERHEAD_S, forward_overhead_s=EAGER_FORWARD_OVERHEAD_S
    )


@dataclass(frozen=True, slots=True)
class Deployment:
    """vLLM settings that pin memory, and the suffix that names the result.

    ``variant`` names the profile ``<gpu>-<variant>/<target>+<draft>``.
    """

    variant: str | None = None
    kv_blocks_with_draft: int | None = None
    kv_blocks_without_draft: int | None = None
    max_model_len: int | None = None


def build_profile(
    gpu_name: str | GPU,
    target_name: str | ModelArch,
    draft_name: str | ModelArch,
    command: str,
    params: RooflineParams | None = None,
    activation_reserve_bytes: int | None = None,
    deployment: Deployment | None = None,
    tp: int = 1,
) -> dict[str, Any]:
    """The profile JSON (format_version 1) the roofline predicts for this pair.

    Names are looked up in the catalogue; a ``GPU`` or ``ModelArch`` (``--gpu-spec``,
    ``--model-config``) is used as given. With ``tp`` > 1 every time and memory figure
    is one rank's (nightjar.tensor_parallel); target and draft both run at ``tp``.
    """
    p = params or RooflineParams()
    dep = deployment or Deployment()
    contexts = [c for c in CONTEXT_GRID if dep.max_model_len is None or c <= dep.max_model_len]
    gpu = get_gpu(gpu_name) if isinstance(gpu_name, str) else gpu_name
    t = get_model(target_name) if isinstance(target_name, str) else target_name
    d = get_model(draft_name) if isinstance(draft_name, str) else draft_name
    check_same_vocab(t, d)
    t, d = shard(t, tp), shard(d, tp)
    reserve = (
        estimate_activation_reserve(t, p)
        if activation_reserve_bytes is None
        else activation_reserve_bytes
    )
    decode = []
    for b in BATCH_GRID:
        for g in GAMMA_GRID:
            for c in contexts:
                ds, vs = draft_s(gpu, d, p, b, g, c), verify_s(gpu, t, p, b, g, c)
                step = ds + vs + p.step_overhead_s + (p.spec_overhead_s if g else 0.0)
                decode.append([b, g, c, _ms(step), _ms(ds), _ms(vs)])
    fwd = [
        [b, c, _ms(forward_s(gpu, d, p, tokens=b, seqs=b, context=c))]
        for b in BATCH_GRID
        for c in contexts
    ]
    prefill = [
        [n, _ms(prefill_s(gpu, t, p, n)), _ms(prefill_s(gpu, d, p, n))] for n in PREFILL_GRID
    ]
    priors = ACCEPTANCE_PRIORS.get((t.name, d.name), {})
    memory: dict[str, Any] = {
        "device_bytes": gpu.memory_bytes,
        "gpu_memory_utilization": p.gpu_memory_utilization,
        "target_weight_bytes": t.weight_bytes,
        "draft_weight_bytes": d.weight_bytes,
        "activation_reserve_bytes": reserve,
        "target_kv_bytes_per_token": t.kv_bytes_per_token,
        "draft_kv_bytes_per_token": d.kv_bytes_per_token,
        "block_size": p.block_size,
        "host_link_bytes_per_s": gpu.host_link_bytes_per_s,
        "device_bandwidth_bytes_per_s": gpu.mem_bandwidth_bytes_per_s,
    }
    for key in ("kv_blocks_with_draft", "kv_blocks_without_draft", "max_model_len"):
        if getattr(dep, key) is not None:
            memory[key] = getattr(dep, key)
    gpu_label = f"{gpu.name}-tp{tp}" if tp > 1 else gpu.name
    gpu_label = f"{gpu_label}-{dep.variant}" if dep.variant else gpu_label
    return {
        "format_version": 1,
        "name": f"{gpu_label}/{t.name}+{d.name}",
        "source": "roofline",
        "command": command,
        "notes": "Roofline model (nightjar.roofline), not a measurement. Acceptance values "
        "are assumed priors, not measured.",
        "gpu": gpu.name,
        "target": t.name,
        "draft": d.name,
        "hardware": {
            "description": gpu.description,
            "peak_flops": gpu.peak_flops,
            "target_hf_id": t.hf_id,
            "draft_hf_id": d.hf_id,
            **tp_metadata(gpu, t, tp),
        },
        "roofline": asdict(p),
        "memory": memory,
        "decode": decode,
        "draft_forward": fwd,
        "prefill": prefill,
        "acceptance": {w: {"mean": m, "concentration": k} for w, (m, k) in priors.items()},
    }
