"""A calibrated roofline model that generates a profile for a GPU and a model pair.

One forward pass over ``T`` tokens of ``B`` sequences at context ``c`` costs

    t = forward_overhead + layers * max(layer_host, layer_gpu) + embedding + norm + lm_head
    layer_gpu = 4 GEMMs + 2 norms + rotary + activation + attention

Every GEMM and element-wise kernel is priced by ``nightjar.roofline.calibration.ops`` with
coefficients fitted to Microsoft Vidur's CUDA-timed per-op tables (GEMM efficiency
rising with tokens toward a plateau, a per-kernel launch term; see
``tools/calibrate/fit_vidur.py``); a GPU without its own table borrows one with the GEMM
half-efficiency token count scaled by the ratio of ridge points
(``nightjar.roofline.calibration.fits``). Attention is analytic: a launch term plus
max(FLOPs, KV bytes) at the fitted plateau and streaming efficiencies. The host-side
terms (per forward, per layer in eager mode, per step and per sequence, sampling,
rejection sampling) and their sources are in ``nightjar.roofline.calibration.overheads``.
Kernel classes are summed, not maxed together: GEMMs and attention run one after
the other, and a single max over the totals would hide the KV read behind the GEMMs.

A decode step with speculation length gamma:

* verify = one target forward over ``T = B * (gamma + 1)`` tokens; its attention
  reads each request's KV once (``query-aware``) or ``gamma + 1`` times
  (``expansion``, older vLLM's batch expansion);
* draft = gamma sequential proposal passes over ``B`` tokens, each sampling its
  token, the first over ``2B``: it also writes the draft KV of the previous step's
  last proposal and the bonus token (vLLM folds that catch-up into the first pass;
  charging both tokens is an upper bound, exact when every draft was accepted);
  gamma = 0 has no draft time;
* step = draft + verify + ``step_overhead_s`` (fixed, per sequence, target
  sampling, and with gamma > 0 rejection sampling and proposal bookkeeping).

Prefill of ``n`` tokens = one forward over a single sequence of ``n`` tokens with
causal attention (``n (n + 1) / 2`` query-key pairs) and one logits row; the GEMM
efficiency curve makes it compute-bound at its token count.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from nightjar.core.drafter import DRAFT_MODEL, drafter_kind
from nightjar.errors import NightjarInputError
from nightjar.profile.document import DecodeRow, DraftForwardRow, PrefillRow, ProfileDocument
from nightjar.profile.profile import MemoryFacts
from nightjar.roofline.calibration.fits import fit_for, fit_name, fit_ridge, get_fit
from nightjar.roofline.calibration.fitted import VIDUR_COMMIT
from nightjar.roofline.calibration.ops import OpFit, elementwise_s, gemm_s
from nightjar.roofline.calibration.overheads import EAGER, GRAPH, term_values
from nightjar.roofline.drafters import (
    KIND_PRIORS,
    DraftCost,
    check_kind,
    head_cost,
    lookup_cost,
)
from nightjar.roofline.hardware import GPU, ModelArch, check_same_vocab, get_gpu, get_model
from nightjar.roofline.tensor_parallel import comm_s, shard, tp_metadata

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


_GRAPH = term_values(GRAPH)
VIDUR_GPUS = ("a100", "a40", "h100")  # the op tables Vidur measured
VERIFY_ATTENTION = ("query-aware", "expansion")


@dataclass(frozen=True, slots=True)
class RooflineParams:
    """The roofline's settings; each profile records them under ``"roofline"``.

    Kernel costs come from the fitted operator table ``op_fit`` ("auto": the one
    ``nightjar.roofline.calibration.fits`` maps the GPU to). The overhead terms and their sources
    are in ``nightjar.roofline.calibration.overheads`` (CUDA-graph values by default).
    """

    op_fit: str = "auto"
    execution: str = GRAPH  # "graph" (CUDA graphs) or "eager" (--enforce-eager)
    # query-aware: a verify pass reads each request's KV once; expansion: B (gamma + 1)
    # times, as older vLLM's batch expansion scored every proposal as its own sequence.
    verify_attention: str = "query-aware"
    forward_overhead_s: float = _GRAPH["forward"]
    layer_overhead_s: float = _GRAPH["layer"]
    step_overhead_s: float = _GRAPH["step"]
    seq_overhead_s: float = _GRAPH["per_seq"]
    sample_overhead_s: float = _GRAPH["sample"]
    spec_overhead_s: float = _GRAPH["rejection"]
    spec_seq_overhead_s: float = _GRAPH["spec_per_seq"]
    gpu_memory_utilization: float = 0.9
    block_size: int = 16
    # vLLM profiles activations with a full token budget and sampler batch.
    profile_tokens: int = 8192
    profile_seqs: int = 256
    non_torch_bytes: int = 512 << 20  # CUDA context, cuBLAS workspaces


def resolve(p: RooflineParams, gpu: GPU) -> RooflineParams:
    """Pin ``op_fit`` to a named table, so the profile records which one priced it."""
    if p.verify_attention not in VERIFY_ATTENTION:
        raise NightjarInputError(
            f"verify attention {p.verify_attention!r}: use one of {', '.join(VERIFY_ATTENTION)}"
        )
    # A --gpu-spec GPU described "like" a catalogue one borrows that one's fit.
    name = gpu.like or gpu.name
    return replace(p, op_fit=fit_name(name)) if p.op_fit == "auto" else p


def layer_gpu_s(
    gpu: GPU, m: ModelArch, fit: OpFit, *, tokens: int, kv_read_tokens: float, pairs: float
) -> float:
    """One decoder layer's kernels: four GEMMs, norms, rotary, activation, attention.

    The residual adds are fused into vLLM's norms (fused_add_rms_norm), so they are
    not separate kernels here. Attention is analytic: a fixed launch (two kernels,
    cache write and attention, at the fitted GEMM launch) plus
    max(FLOPs at the plateau efficiency, KV bytes at the weight-read efficiency).
    """
    peak, bw, db = gpu.peak_flops, gpu.mem_bandwidth_bytes_per_s, m.dtype_bytes
    h, q, kv = m.hidden, m.heads * m.head_dim, m.kv_heads * m.head_dim
    gemms = (
        gemm_s(fit, peak, bw, tokens, h, q + 2 * kv, db)
        + gemm_s(fit, peak, bw, tokens, q, h, db)
        + gemm_s(fit, peak, bw, tokens, h, 2 * m.intermediate, db)
        + gemm_s(fit, peak, bw, tokens, m.intermediate, h, db)
    )
    elementwise = (
        2 * elementwise_s(fit, "norm", bw, 2.0 * tokens * h * db)
        + elementwise_s(fit, "rope", bw, 2.0 * tokens * (q + kv) * db)
        + elementwise_s(fit, "act", bw, 3.0 * tokens * m.intermediate * db)
    )
    kv_layer = m.kv_bytes_per_token / m.layers
    attention = 2 * fit.gemm_launch_s + max(
        m.attention_flops_per_token_per_ctx / m.layers * pairs / (peak * fit.gemm_eff_max),
        (kv_read_tokens + tokens) * kv_layer / (bw * fit.gemm_mem_eff),
    )
    return gemms + elementwise + attention


def forward_s(
    gpu: GPU,
    m: ModelArch,
    p: RooflineParams,
    *,
    tokens: int,
    seqs: int,
    context: float,
    attn_pairs: float | None = None,
    kv_read_tokens: float | None = None,
    logit_tokens: int | None = None,
) -> float:
    """One forward pass of ``tokens`` tokens of ``seqs`` sequences at ``context``.

    ``attn_pairs`` (query-key pairs) defaults to tokens * context, ``kv_read_tokens``
    (KV entries read) to seqs * context and ``logit_tokens`` (lm_head rows) to tokens.
    Each layer takes max(host dispatch, its GPU kernels): see
    ``nightjar.roofline.calibration.overheads``.
    """
    fit = fit_for(resolve(p, gpu).op_fit, gpu)
    bw, db = gpu.mem_bandwidth_bytes_per_s, m.dtype_bytes
    layer = layer_gpu_s(
        gpu, m, fit,
        tokens=tokens,
        kv_read_tokens=seqs * context if kv_read_tokens is None else kv_read_tokens,
        pairs=tokens * context if attn_pairs is None else attn_pairs,
    )
    # Tensor parallelism: each layer's two all-reduces are GPU time of that layer.
    layer += comm_s(gpu, m, tokens) / m.layers
    rows = tokens if logit_tokens is None else logit_tokens
    head = (
        elementwise_s(fit, "add", bw, 2.0 * tokens * m.hidden * db)  # embedding gather
        + elementwise_s(fit, "norm", bw, 2.0 * tokens * m.hidden * db)
        # vocab_rows: one rank's share of the LM head under tensor parallelism.
        + gemm_s(fit, gpu.peak_flops, bw, rows, m.hidden, m.vocab_rows, db)
    )
    return p.forward_overhead_s + m.layers * max(p.layer_overhead_s, layer) + head


def sample_s(gpu: GPU, m: ModelArch, p: RooflineParams, rows: int) -> float:
    """One sampling call over ``rows`` logit rows: fixed cost plus fp32 logits written
    and read back (8 bytes per vocabulary entry)."""
    return p.sample_overhead_s + rows * m.vocab * 8 / gpu.mem_bandwidth_bytes_per_s


def draft_s(gpu: GPU, d: ModelArch, p: RooflineParams, b: int, gamma: int, ctx: float) -> float:
    """gamma proposal passes, each a forward plus sampling its token."""
    if gamma == 0:
        return 0.0
    first = forward_s(gpu, d, p, tokens=2 * b, seqs=b, context=ctx, logit_tokens=b)
    rest = forward_s(gpu, d, p, tokens=b, seqs=b, context=ctx)
    return first + (gamma - 1) * rest + gamma * sample_s(gpu, d, p, b)


def verify_s(gpu: GPU, t: ModelArch, p: RooflineParams, b: int, gamma: int, ctx: float) -> float:
    tokens = b * (gamma + 1)
    reads = b * ctx if p.verify_attention == "query-aware" else tokens * ctx
    return forward_s(gpu, t, p, tokens=tokens, seqs=b, context=ctx, kv_read_tokens=reads)


def step_overhead_s(gpu: GPU, t: ModelArch, p: RooflineParams, b: int, gamma: int) -> float:
    """Everything in a step besides the draft and verify forwards."""
    rows = b * (gamma + 1)
    fixed = p.step_overhead_s + p.seq_overhead_s * b + sample_s(gpu, t, p, rows)
    if gamma == 0:
        return fixed
    probs = rows * t.vocab * 8 / gpu.mem_bandwidth_bytes_per_s  # target and draft, fp32
    return fixed + p.spec_overhead_s + p.spec_seq_overhead_s * b + probs


def prefill_s(gpu: GPU, m: ModelArch, p: RooflineParams, n: int) -> float:
    # A single sequence: the KV it writes is read back once by its own attention, and
    # only its last position needs logits.
    return forward_s(
        gpu, m, p, tokens=n, seqs=1, context=n, attn_pairs=n * (n + 1) / 2, logit_tokens=1
    )


def estimate_activation_reserve(t: ModelArch, p: RooflineParams) -> int:
    """What vLLM's memory profiling leaves aside: activations of a full-budget forward
    (hidden-sized and MLP-sized buffers), fp32 logits and probabilities for the
    sampler batch, and non-torch memory. An estimate; a measured profile replaces it.
    """
    act = p.profile_tokens * (4 * t.hidden + 3 * t.intermediate) * t.dtype_bytes
    sampler = p.profile_seqs * t.vocab * 4 * 2
    return act + sampler + p.non_torch_bytes


def eager_params(p: RooflineParams) -> RooflineParams:
    """``--enforce-eager``: no CUDA graphs, every kernel launched from the host."""
    v = term_values(EAGER)
    return replace(
        p,
        execution=EAGER,
        forward_overhead_s=v["forward"],
        layer_overhead_s=v["layer"],
        step_overhead_s=v["step"],
        seq_overhead_s=v["per_seq"],
        sample_overhead_s=v["sample"],
        spec_overhead_s=v["rejection"],
        spec_seq_overhead_s=v["spec_per_seq"],
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


def _fit_source(op_fit: str) -> str:
    if op_fit in VIDUR_GPUS:
        return (
            f"Microsoft Vidur's measured {op_fit.upper()} op tables (MIT, commit {VIDUR_COMMIT})"
        )
    return f"measured {op_fit.upper()} op tables (source in nightjar.roofline.calibration.fitted)"


def _ridge_note(gpu: GPU, op_fit: str) -> str:
    """How a borrowed fit was moved to this GPU (nightjar.roofline.calibration.fits)."""
    ratio = gpu.peak_flops / gpu.mem_bandwidth_bytes_per_s / fit_ridge(op_fit)
    if abs(ratio - 1.0) < 1e-9:
        return ""
    return (
        f", GEMM half-efficiency token count scaled by this GPU's ridge point relative to "
        f"{op_fit.upper()}'s (x{ratio:.3f}: {get_fit(op_fit).gemm_tokens_half:.0f} -> "
        f"{fit_for(op_fit, gpu).gemm_tokens_half:.0f} tokens)"
    )


def draft_model_cost(gpu: GPU, d: ModelArch, p: RooflineParams) -> DraftCost:
    """A separate draft model's prices: the roofline's own forwards of ``d``."""
    return DraftCost(
        d, d.weight_bytes, d.kv_bytes_per_token,
        step=lambda b, g, c: draft_s(gpu, d, p, b, g, c),
        forward=lambda b, c: forward_s(gpu, d, p, tokens=b, seqs=b, context=c),
        prefill=lambda n: prefill_s(gpu, d, p, n),
    )


def drafter_cost(kind: str, gpu: GPU, t: ModelArch, d: ModelArch | None,
                 p: RooflineParams) -> DraftCost:
    """The drafter of ``kind`` for target shard ``t`` (``d``: the draft model's shard)."""
    if kind == DRAFT_MODEL:
        assert d is not None
        return draft_model_cost(gpu, d, p)
    if kind in ("ngram", "suffix"):
        return lookup_cost(kind, t)
    fit = resolve(p, gpu).op_fit
    return head_cost(kind, gpu, t, p, forward_s, lambda b: sample_s(gpu, t, p, b), fit,
                     prefill_s)


def build_profile(
    gpu_name: str | GPU,
    target_name: str | ModelArch,
    draft_name: str | ModelArch | None,
    command: str,
    params: RooflineParams | None = None,
    activation_reserve_bytes: int | None = None,
    deployment: Deployment | None = None,
    tp: int = 1,
    drafter: str = DRAFT_MODEL,
) -> dict[str, Any]:
    """The profile JSON the roofline predicts for this pair (laid out by
    ``nightjar.profile.document``).

    Names are looked up in the catalogue; a ``GPU`` or ``ModelArch`` (``--gpu-spec``,
    ``--model-config``) is used as given. With ``tp`` > 1 every time and memory figure
    is one rank's (nightjar.roofline.tensor_parallel); target and draft both run at ``tp``.
    ``drafter`` other than a draft model (nightjar.roofline.drafters) derives the
    drafter from the target; ``draft_name`` is then None.
    """
    dep = deployment or Deployment()
    gpu = get_gpu(gpu_name) if isinstance(gpu_name, str) else gpu_name
    t = get_model(target_name) if isinstance(target_name, str) else target_name
    # vLLM's max_model_len: the deployment's pin, else the target's window (vLLM takes
    # the target's; a draft with a shorter one is cut to it, not the other way round).
    window = dep.max_model_len if dep.max_model_len is not None else t.max_len
    contexts = [c for c in CONTEXT_GRID if window is None or c <= window]
    d = get_model(draft_name) if isinstance(draft_name, str) else draft_name
    check_kind(drafter, t, d is not None and drafter != DRAFT_MODEL)
    if drafter == DRAFT_MODEL:
        if d is None:
            raise NightjarInputError("a draft_model profile needs a draft model")
        check_same_vocab(t, d)
        d = shard(d, tp)
    t = shard(t, tp)
    p = resolve(params or RooflineParams(), gpu)
    cost = drafter_cost(drafter, gpu, t, d, p)
    reserve = (
        estimate_activation_reserve(t, p)
        if activation_reserve_bytes is None
        else activation_reserve_bytes
    )
    decode = []
    for b in BATCH_GRID:
        for g in GAMMA_GRID:
            for c in contexts:
                ds, vs = cost.step(b, g, c), verify_s(gpu, t, p, b, g, c)
                step = ds + vs + step_overhead_s(gpu, t, p, b, g)
                decode.append(DecodeRow.from_seconds(b, g, c, step, ds, vs))
    fwd = [DraftForwardRow.from_seconds(b, c, cost.forward(b, c))
           for b in BATCH_GRID for c in contexts]
    prefill = [PrefillRow.from_seconds(n, prefill_s(gpu, t, p, n), cost.prefill(n))
               for n in PREFILL_GRID]
    dname = cost.arch.name if drafter == DRAFT_MODEL else drafter
    priors = (
        ACCEPTANCE_PRIORS.get((t.name, dname), {})
        if drafter == DRAFT_MODEL
        else KIND_PRIORS[drafter]
    )
    memory = MemoryFacts(
        device_bytes=gpu.memory_bytes,
        gpu_memory_utilization=p.gpu_memory_utilization,
        target_weight_bytes=t.weight_bytes,
        draft_weight_bytes=cost.weight_bytes,
        activation_reserve_bytes=reserve,
        target_kv_bytes_per_token=t.kv_bytes_per_token,
        draft_kv_bytes_per_token=cost.kv_bytes_per_token,
        block_size=p.block_size,
        host_link_bytes_per_s=gpu.host_link_bytes_per_s,
        device_bandwidth_bytes_per_s=gpu.mem_bandwidth_bytes_per_s,
        kv_blocks_with_draft=dep.kv_blocks_with_draft,
        kv_blocks_without_draft=dep.kv_blocks_without_draft,
        max_model_len=window,
    )
    gpu_label = f"{gpu.name}-tp{tp}" if tp > 1 else gpu.name
    gpu_label = f"{gpu_label}-{dep.variant}" if dep.variant else gpu_label
    kind_notes = "" if drafter == DRAFT_MODEL else (
        f" Drafter {drafter} derived from the target (nightjar.roofline.drafters): "
        f"{drafter_kind(drafter).summary}; its costs and acceptance are modelled and "
        "assumed, not measured."
    )
    return ProfileDocument(
        name=f"{gpu_label}/{t.name}+{dname}",
        source="calibrated-roofline",
        command=command,
        notes="Calibrated roofline model (nightjar.roofline), not a measurement of this "
        f"pair: kernel costs fitted to {_fit_source(p.op_fit)}{_ridge_note(gpu, p.op_fit)}; "
        f"attention analytic ({p.verify_attention} verify); "
        f"host overheads for {p.execution} execution, most of them assumed (sources in "
        "the roofline section and nightjar.roofline.calibration.overheads). Acceptance values are "
        "assumed priors, not measured." + kind_notes,
        gpu=gpu.name,
        target=t.name,
        draft=dname,
        hardware={
            "description": gpu.description,
            "peak_flops": gpu.peak_flops,
            "target_hf_id": t.hf_id,
            "draft_hf_id": cost.arch.hf_id,
            **tp_metadata(gpu, t, tp),
        },
        roofline=asdict(p),
        memory=memory,
        decode=decode,
        draft_forward=fwd,
        prefill=prefill,
        acceptance=priors,
        # A draft model is the format's default: the document leaves the key out.
        drafter=drafter,
    ).to_json()
