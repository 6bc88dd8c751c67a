"""Catalogs of GPUs and model architectures that the roofline model reads.

Numbers are public vendor specifications (GPUs) and the models' published
``config.json`` shapes (models). Memory sizes are what ``nvidia-smi`` reports as
total memory, in bytes, because vLLM's ``gpu_memory_utilization`` is a fraction of
that. Host-link bandwidth is an achievable pinned-memory copy rate over PCIe, not the
link's theoretical peak (the draft offload/reload time is bytes / this rate).
"""

from __future__ import annotations

from dataclasses import dataclass

from nightjar.errors import NightjarInputError

MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class GPU:
    name: str
    description: str
    peak_flops: float  # dense bf16 tensor FLOP/s (no structured sparsity)
    mem_bandwidth_bytes_per_s: float
    memory_bytes: int
    host_link_bytes_per_s: float
    # GPU-to-GPU bandwidth per direction (NVLink); 0 for cards that talk over PCIe.
    nvlink_bytes_per_s: float = 0.0
    # The Vidur all-reduce measurements that price this GPU's tensor-parallel
    # all-reduces ("a100", "h100"), or None for the bus-bandwidth model
    # (nightjar.roofline.tensor_parallel).
    all_reduce_table: str | None = None
    # For a --gpu-spec GPU: the catalogue GPU whose measured tables stand in for it.
    like: str | None = None


@dataclass(frozen=True, slots=True)
class ModelArch:
    """A decoder-only transformer's shape (Llama/Qwen2 family: gated MLP, GQA)."""

    name: str
    hf_id: str
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    head_dim: int
    vocab: int
    params: int  # published parameter count; weight bytes use this
    dtype_bytes: int = 2
    tied_embeddings: bool = False
    qkv_bias: bool = False
    # Token ids the tokenizer actually uses when the embedding table is padded past
    # them (Qwen2.5: 151,665 ids in 151,936 or 152,064 rows); None: ``vocab``.
    tokens: int | None = None
    # Tensor-parallel degree this shape is one rank's share of (nightjar.roofline.tensor_parallel).
    tp: int = 1
    # Multi-token-prediction layers the checkpoint carries (``num_nextn_predict_layers``:
    # DeepSeek-V3, MiMo), which vLLM's ``mtp`` drafter runs; 0 for most models.
    mtp_layers: int = 0
    # The context window (``max_position_embeddings``): vLLM's default max_model_len, so
    # the longest prompt it accepts and the length at which it stops a request.
    max_len: int | None = None

    @property
    def vocab_rows(self) -> int:
        """LM-head (and embedding) rows on one rank: vLLM splits them by vocabulary."""
        return -(-self.vocab // self.tp)

    @property
    def token_space(self) -> int:
        """Size of the token-id space a draft must share with its target."""
        return self.tokens if self.tokens is not None else self.vocab

    @property
    def weight_bytes(self) -> int:
        return self.params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        # K and V, every layer, every KV head.
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes

    @property
    def attention_flops_per_token_per_ctx(self) -> int:
        # QK^T and (softmax)V: two multiply-adds per query head, head dim and
        # context position.
        return 4 * self.layers * self.heads * self.head_dim

    def derived_params(self) -> int:
        """Parameter count implied by the shape; a check on the catalog's numbers."""
        q = self.hidden * self.heads * self.head_dim
        kv = 2 * self.hidden * self.kv_heads * self.head_dim
        o = self.heads * self.head_dim * self.hidden
        bias = (self.heads + 2 * self.kv_heads) * self.head_dim if self.qkv_bias else 0
        mlp = 3 * self.hidden * self.intermediate
        per_layer = q + kv + o + bias + mlp + 2 * self.hidden  # two RMSNorm weights
        embed = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * per_layer + embed + self.hidden


GPUS: dict[str, GPU] = {
    g.name: g
    for g in (
        # NVLink per direction: A100 SXM4 600 GB/s and H100 SXM5 900 GB/s bidirectional.
        GPU("a100-80gb", "NVIDIA A100 80GB SXM4", 312e12, 2.039e12, 81920 * MIB, 25e9,
            nvlink_bytes_per_s=300e9, all_reduce_table="a100"),
        GPU("h100-80gb", "NVIDIA H100 80GB SXM5", 989.4e12, 3.35e12, 81559 * MIB, 50e9,
            nvlink_bytes_per_s=450e9, all_reduce_table="h100"),
        GPU("rtx4090", "NVIDIA GeForce RTX 4090 24GB", 165.2e12, 1.008e12, 24564 * MIB, 25e9),
        GPU("l40s", "NVIDIA L40S 48GB", 362.05e12, 0.864e12, 46068 * MIB, 25e9),
        # NVIDIA H200 Tensor Core GPU datasheet (H200 SXM): BF16 1,979 TFLOPS with
        # sparsity (989.5 dense), 141 GB HBM3e at 4.8 TB/s, NVLink 900 GB/s, PCIe Gen5;
        # nvidia-smi reports 143771 MiB.
        GPU("h200", "NVIDIA H200 141GB SXM5", 989.5e12, 4.8e12, 143771 * MIB, 50e9,
            nvlink_bytes_per_s=450e9),
        # NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx, 8-GPU board):
        # BF16 36 PFLOPS with sparsity per board = 2.25 PFLOPS dense per GPU, HBM3e at
        # 8 TB/s per GPU, NVLink 5 1.8 TB/s per GPU; nvidia-smi reports 183359 MiB.
        GPU("b200", "NVIDIA B200 180GB (HGX B200)", 2.25e15, 8.0e12, 183359 * MIB, 50e9,
            nvlink_bytes_per_s=900e9),
    )
}

# The Qwen2.5 tokenizer's ids (151,643 BPE tokens and 22 added): every Qwen2.5 size and
# the R1 distills built on them share it, padded to different embedding sizes.
QWEN2_TOKENS = 151_665

# One model per row reads as a table:
# name, hf id, layers, hidden, intermediate, heads, kv heads, head dim, vocab, params;
# max_len is the hf id's config.json max_position_embeddings.
# fmt: off
MODELS: dict[str, ModelArch] = {
    m.name: m
    for m in (
        ModelArch("vicuna-13b", "lmsys/vicuna-13b-v1.3",
                  40, 5120, 13824, 40, 40, 128, 32000, 13_015_864_320, max_len=2048),
        ModelArch("vicuna-68m", "double7/vicuna-68m",
                  2, 768, 3072, 12, 12, 64, 32000, 68_030_208, max_len=2048),
        ModelArch("deepseek-r1-distill-qwen-7b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B",
                  28, 3584, 18944, 28, 4, 128, 152064, 7_615_616_512, qkv_bias=True,
                  tokens=QWEN2_TOKENS, max_len=131072),
        ModelArch("deepseek-r1-distill-qwen-32b", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B",
                  64, 5120, 27648, 40, 8, 128, 152064, 32_763_876_352, qkv_bias=True,
                  tokens=QWEN2_TOKENS, max_len=131072),
        ModelArch("qwen2.5-0.5b", "Qwen/Qwen2.5-0.5B-Instruct",
                  24, 896, 4864, 14, 2, 64, 151936, 494_032_768,
                  tied_embeddings=True, qkv_bias=True, tokens=QWEN2_TOKENS, max_len=32768),
        ModelArch("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct",
                  32, 4096, 14336, 32, 8, 128, 128256, 8_030_261_248, max_len=131072),
        ModelArch("llama-3.2-1b", "meta-llama/Llama-3.2-1B-Instruct",
                  16, 2048, 8192, 32, 8, 64, 128256, 1_235_814_400, tied_embeddings=True,
                  max_len=131072),
    )
}
# fmt: on


def get_gpu(name: str) -> GPU:
    gpu = GPUS.get(name.lower())
    if gpu is None:
        raise NightjarInputError(f"unknown GPU {name!r} (known: {', '.join(sorted(GPUS))})")
    return gpu


def get_model(name: str) -> ModelArch:
    """A catalogue model by its short name or its Hugging Face id (any case)."""
    model = MODELS.get(name.lower()) or next(
        (m for m in MODELS.values() if m.hf_id.lower() == name.lower()), None
    )
    if model is None:
        raise NightjarInputError(f"unknown model {name!r} (known: {', '.join(sorted(MODELS))})")
    return model


def check_same_vocab(target: ModelArch, draft: ModelArch) -> None:
    """A draft proposes token ids the target verifies: their id spaces must match."""
    if target.token_space != draft.token_space:
        raise NightjarInputError(
            f"target {target.name} and draft {draft.name} have different vocabularies "
            f"({target.token_space} vs {draft.token_space} token ids): a draft must share "
            "its target's tokenizer"
        )
