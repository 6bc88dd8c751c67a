"""Host-side and sampling overheads of a serving step, each with where its value comes from.

None of these is in Vidur's kernel tables (those time GPU kernels only). Where no
public figure gives a value, the value is an assumption and says so; the cross-checks
in docs/roofline.md and reports/profiles/README.md compare the result with public step
times, they do not fit them.

How the roofline uses them (``nightjar/roofline/costs.py``; the forward terms price the
target's and the draft's forwards alike, since one engine launches both):

* forward = ``forward`` + sum over layers of max(``layer`` host time, the layer's GPU
  kernels) + embedding, final norm and lm_head kernels. With CUDA graphs one replay
  launches a layer's kernels (``layer`` = 0, the GPU time stands); in eager mode the
  host dispatches every kernel from Python, and a small model's short kernels wait
  for it: a tiny draft is launch-bound.
* a draft proposal pass also samples its token (``sample`` + logits bytes over
  bandwidth);
* step = draft + verify + ``step`` + ``per_seq`` * B + target sampling; with
  speculation also ``rejection`` + ``spec_per_seq`` * B + the probabilities the
  rejection sampler reads over bandwidth.
"""

from __future__ import annotations

from dataclasses import dataclass

# A Llama/Qwen2 decoder layer in vLLM launches about 11 kernels: input norm, QKV GEMM,
# rotary, KV-cache write, attention, output GEMM, fused add+norm, gate/up GEMM,
# SiLU-and-mul, down GEMM, and the residual bookkeeping (counted from vLLM's
# LlamaDecoderLayer / Qwen2DecoderLayer module structure).
KERNELS_PER_LAYER = 11
# Host time to dispatch one kernel from eager PyTorch through vLLM's layer modules.
# ASSUMED: PyTorch's CUDA-graphs documentation describes per-launch CPU overhead of
# microseconds; we take 12 us per kernel including vLLM's Python module code. Not a
# measurement. Cross-check (not a fit): the paper's public step logs for
# DeepSeek-R1-Distill-Qwen-7B + Qwen2.5-0.5B (RTX 4090, B = 1, gamma 4, eager) show
# ~3.9 ms per draft step; this value prices it at 4.08 ms (reports/profiles/README.md). The value
# was chosen knowing that figure, so the agreement is not independent evidence.
EAGER_KERNEL_HOST_S = 12e-6


@dataclass(frozen=True, slots=True)
class Term:
    value: float
    source: str


# name -> (CUDA-graph value, eager value). Every value in seconds.
GRAPH, EAGER = "graph", "eager"
TERMS: dict[str, dict[str, Term]] = {
    "forward": {
        GRAPH: Term(200e-6, "ASSUMED: input preparation (positions, slot mapping, "
                    "attention metadata) and one graph replay per forward"),
        EAGER: Term(400e-6, "ASSUMED: input preparation without captured metadata "
                    "buffers (vLLM v0's prepare_model_input runs per forward)"),
    },
    "layer": {
        GRAPH: Term(0.0, "one graph replay launches all kernels; the gaps between "
                    "kernels are in the Vidur-fitted per-kernel launch terms"),
        EAGER: Term(KERNELS_PER_LAYER * EAGER_KERNEL_HOST_S,
                    f"{KERNELS_PER_LAYER} kernels per layer x {EAGER_KERNEL_HOST_S * 1e6:.0f} us "
                    "host dispatch each (ASSUMED per-kernel cost; kernel count from vLLM's "
                    "decoder layer)"),
    },
    "step": {
        GRAPH: Term(0.5e-3, "ASSUMED: scheduler and output processing, the part that "
                    "does not grow with the batch"),
        EAGER: Term(0.5e-3, "as with CUDA graphs (host work outside the forward)"),
    },
    "per_seq": {
        GRAPH: Term(10e-6, "ASSUMED per running sequence per step: scheduling, block "
                    "tables, input preparation, detokenisation. Grows with B as SmartSpec "
                    "(arXiv 2406.14066) and vLLM RFC #4565 describe; vLLM's v0.6.0 "
                    "performance blog measured scheduling at 29% of Llama-3-8B H100 "
                    "execution time; no public per-sequence figure found"),
        EAGER: Term(10e-6, "as with CUDA graphs"),
    },
    "sample": {
        GRAPH: Term(0.15e-3, "ASSUMED: sampler launch and host work per sampling call "
                    "(target step and each draft proposal pass); its logits traffic "
                    "(tokens x vocab x 8 bytes) is priced over bandwidth"),
        EAGER: Term(0.15e-3, "as with CUDA graphs (the sampler is not graph-captured)"),
    },
    "rejection": {
        GRAPH: Term(0.2e-3, "ASSUMED: rejection sampler fixed cost per speculative step; "
                    "it reads target and draft probabilities (B (gamma+1) x vocab x 8 "
                    "bytes), priced over bandwidth"),
        EAGER: Term(0.2e-3, "as with CUDA graphs"),
    },
    "spec_per_seq": {
        GRAPH: Term(5e-6, "ASSUMED: proposal bookkeeping per sequence per speculative "
                    "step (SmartSpec and RFC #4565: SD's CPU cost grows with the batch)"),
        EAGER: Term(5e-6, "as with CUDA graphs"),
    },
}


def term_values(mode: str) -> dict[str, float]:
    """The overhead values (seconds) of ``graph`` or ``eager`` execution."""
    return {name: by_mode[mode].value for name, by_mode in TERMS.items()}


def term_source(name: str, mode: str) -> str:
    """The term's source; an eager value equal to the CUDA-graph one cites that one's."""
    source = TERMS[name][mode].source
    if mode == EAGER and source.startswith("as with CUDA graphs"):
        source = f"{source}: {TERMS[name][GRAPH].source}"
    return source
