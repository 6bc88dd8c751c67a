"""What the drafters that are not a separate model cost, in the roofline's terms.

A drafter is priced by three functions, whatever its kind (``DraftCost``): the
gamma proposal passes of one decode step, the one pass vLLM runs at K = 0 to keep a
drafter's KV in sync (``draft_forward``), and its pass over prompt tokens
(``prefill``). For a draft model those are the roofline's own forwards of the draft
(``nightjar.roofline.costs``). For the others:

- **EAGLE-3 head** (vLLM ``llama_eagle3.py``): one decoder layer at the target's
  shape whose q/k/v read ``[embeds, hidden]`` (2 x hidden wide), ``fc`` folding three
  of the target's hidden states (3 x hidden -> hidden) once per step, a final norm,
  and its own LM head over ``draft_vocab`` rows (the EAGLE-3 reference training uses
  32,000; capped at the target's vocabulary). The embedding is the target's. Its
  first pass runs over every token the target just verified, ``B (gamma + 1)``,
  (each needs its hidden state; exact when all drafts were accepted, an upper bound
  otherwise); the rest over ``B``.
- **EAGLE head** (``llama_eagle.py``): ``fc`` over ``[embeds, hidden]`` (2 x hidden),
  one decoder layer; embedding and LM head are the target's (its forward still
  computes the target-sized LM head).
- **MTP** (DeepSeek-V3, MiMo, GLM-4.5 style): the target's own MTP layer, a decoder
  layer plus ``input_proj`` (2 x hidden -> hidden) and three norms; embedding and
  head shared. Weights and KV are real device memory but belong to the target's
  checkpoint: not offloadable.
- **n-gram / suffix lookup**: no forward, no weights, no KV: a host cost per step
  (``LOOKUP_STEP_S`` + ``LOOKUP_SEQ_S`` per sequence), the same for every gamma
  above 0 (one lookup proposes all gamma tokens). Assumed, not measured: vLLM's
  n-gram proposer is a numba KMP over each request's context; the suffix tree lookup
  (arctic-inference) walks a tree per request. ``nightjar profile`` measures both on
  the engine.

Acceptance per kind (``KIND_PRIORS``) is assumed, not measured. n-gram and suffix
acceptance depend on the prompt: a request that quotes or edits its prompt (code,
summaries, RAG) accepts most drafts, fresh prose almost none; their priors are a
low mean with a low Beta concentration (a wide spread, most requests near 0).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from nightjar.core.drafter import DRAFT_MODEL, drafter_kind
from nightjar.errors import NightjarInputError
from nightjar.roofline.calibration.fits import fit_for
from nightjar.roofline.calibration.ops import OpFit, gemm_s
from nightjar.roofline.hardware import GPU, ModelArch

EAGLE3_DRAFT_VOCAB = 32000
# Host time of one lookup step (assumed): a fixed call cost and a per-request search.
LOOKUP_STEP_S = {"ngram": 20e-6, "suffix": 40e-6}
LOOKUP_SEQ_S = {"ngram": 10e-6, "suffix": 25e-6}

# Assumed acceptance priors (mean, Beta concentration) per drafter kind and workload.
KIND_PRIORS: dict[str, dict[str, tuple[float, float]]] = {
    # EAGLE-3 heads accept more than a small draft model of the same family (the
    # EAGLE-3 paper's acceptance lengths); EAGLE less; MTP layers trained with the
    # target (DeepSeek-V3 reports 85-90% for its first MTP token).
    "eagle3": {"sharegpt": (0.75, 8.0), "alpaca": (0.78, 8.0), "specbench": (0.72, 8.0)},
    "eagle": {"sharegpt": (0.65, 8.0), "alpaca": (0.68, 8.0), "specbench": (0.62, 8.0)},
    "mtp": {"sharegpt": (0.80, 8.0), "alpaca": (0.82, 8.0), "specbench": (0.78, 8.0)},
    # Chat (sharegpt) repeats little of its prompt; instructions less; specbench mixes
    # summarisation and RAG, where lookups shine.
    "ngram": {"sharegpt": (0.20, 1.5), "alpaca": (0.15, 1.5), "specbench": (0.35, 1.5)},
    "suffix": {"sharegpt": (0.30, 1.5), "alpaca": (0.25, 1.5), "specbench": (0.45, 1.5)},
}

Forward = Callable[..., float]


@dataclass(frozen=True, slots=True)
class DraftCost:
    """The drafter's three prices (seconds) and its memory, as the profile needs them."""

    arch: ModelArch  # name/hf_id in the profile; weights and KV below
    weight_bytes: int
    kv_bytes_per_token: int
    step: Callable[[int, int, float], float]  # (B, gamma, context) -> proposal passes
    forward: Callable[[int, float], float]  # (B, context) -> the K = 0 sync pass
    prefill: Callable[[int], float]  # prompt tokens -> its pass over them


def head_arch(kind: str, t: ModelArch) -> ModelArch:
    """The drafter as a one-layer ModelArch at the target's shape; its weights are what
    it adds to the target's. ``t`` may be one rank's shard: heads, KV heads and the
    MLP are then that rank's, and so are the LM head's rows."""
    q, kv = t.heads * t.head_dim, t.kv_heads * t.head_dim
    h = t.hidden
    mlp = 3 * h * t.intermediate
    if kind == "eagle3":
        vocab = min(EAGLE3_DRAFT_VOCAB, t.vocab)
        rows = -(-vocab // t.tp)
        attn = 2 * h * (q + 2 * kv) + q * h
        own = attn + mlp + 3 * h * h + rows * h + 4 * h  # fc, LM head, four norms
        return replace(t, name=f"{t.name}-eagle3", hf_id=f"EAGLE-3 head for {t.hf_id}",
                       layers=1, vocab=vocab, params=own, tied_embeddings=False,
                       mtp_layers=0)
    if kind in ("eagle", "mtp"):
        attn = h * (q + 2 * kv) + q * h
        norms = h if kind == "eagle" else 4 * h
        own = attn + mlp + 2 * h * h + norms  # the layer, fc / input_proj, norms
        label = "EAGLE head" if kind == "eagle" else "MTP layer"
        return replace(t, name=f"{t.name}-{kind}", hf_id=f"{label} of {t.hf_id}", layers=1,
                       params=own, mtp_layers=0)
    raise NightjarInputError(f"drafter {kind!r} has no head shape")


def _extra_gemm_s(gpu: GPU, kind: str, t: ModelArch, fit: OpFit, tokens: int) -> float:
    """What a head adds to a one-layer forward: its fc (input_proj), and for EAGLE-3
    the q/k/v projections' second hidden-wide input."""
    peak, bw, db = gpu.peak_flops, gpu.mem_bandwidth_bytes_per_s, t.dtype_bytes
    q, kv = t.heads * t.head_dim, t.kv_heads * t.head_dim
    fc_in = 3 * t.hidden if kind == "eagle3" else 2 * t.hidden
    extra = gemm_s(fit, peak, bw, tokens, fc_in, t.hidden, db)
    if kind == "eagle3":
        extra += gemm_s(fit, peak, bw, tokens, t.hidden, q + 2 * kv, db)
    return extra


def head_cost(kind: str, gpu: GPU, t: ModelArch, p: object, forward_s: Forward,
              sample_s: Callable[[int], float], op_fit: str, prefill_s: Callable[..., float]
              ) -> DraftCost:
    """An EAGLE/EAGLE-3 head's or MTP layer's prices (``forward_s``: the roofline's)."""
    arch = head_arch(kind, t)
    fit = fit_for(op_fit, gpu)

    def pass_s(tokens: int, seqs: int, ctx: float, logits: int | None = None) -> float:
        return forward_s(gpu, arch, p, tokens=tokens, seqs=seqs, context=ctx,
                         logit_tokens=logits) + _extra_gemm_s(gpu, kind, t, fit, tokens)

    def step(b: int, gamma: int, ctx: float) -> float:
        if gamma == 0:
            return 0.0
        first = pass_s(b * (gamma + 1), b, ctx, logits=b)
        return first + (gamma - 1) * pass_s(b, b, ctx) + gamma * sample_s(b)

    def fwd(b: int, ctx: float) -> float:
        return pass_s(b, b, ctx)

    def prefill(n: int) -> float:
        return prefill_s(gpu, arch, p, n) + _extra_gemm_s(gpu, kind, t, fit, n)

    return DraftCost(arch, arch.weight_bytes, arch.kv_bytes_per_token, step, fwd, prefill)


def lookup_cost(kind: str, t: ModelArch) -> DraftCost:
    """An n-gram or suffix lookup: a host cost per speculative step, nothing else."""
    fixed, per_seq = LOOKUP_STEP_S[kind], LOOKUP_SEQ_S[kind]
    arch = replace(t, name=kind, hf_id=f"{kind} lookup (no model)", layers=0, params=0,
                   mtp_layers=0)

    def step(b: int, gamma: int, ctx: float) -> float:
        return 0.0 if gamma == 0 else fixed + per_seq * b

    return DraftCost(arch, 0, 0, step, lambda b, c: 0.0, lambda n: 0.0)


def check_kind(kind: str, target: ModelArch, has_draft: bool) -> None:
    """A roofline drafter kind the target can have; a draft model only for draft_model."""
    k = drafter_kind(kind, "--drafter")
    if kind == DRAFT_MODEL:
        return
    if has_draft:
        raise NightjarInputError(
            f"--drafter {kind}: the drafter is derived from the target ({target.name}); "
            "drop --draft/--draft-config (they name a separate draft model)"
        )
    if kind == "mtp" and target.mtp_layers == 0:
        raise NightjarInputError(
            f"--drafter mtp: {target.name} has no MTP layers; MTP needs a target trained "
            "with them (DeepSeek-V3, MiMo, GLM-4.5: give its --model-config with "
            "num_nextn_predict_layers)"
        )
    assert k.name == kind
