"""A plain-PyTorch Llama/Qwen2-shaped decoder and GPU timers, for measuring on a GPU.

For the calibration tools beside it (``gpu_ops.py``, ``gpu_steps.py``,
``gpu_attention.py``): random weights, a dense per-sequence KV cache (not vLLM's
paged one), cuBLAS GEMMs through ``F.linear``, ``F.scaled_dot_product_attention``
for attention, and unfused norms and rotary. It is
what the roofline's kernels would be without vLLM's fused ones, so its step times are
an upper-bound check on the roofline's kernel terms, not a stand-in for vLLM.

Timers: ``graph_ms`` captures a callable in a CUDA graph and times replays with CUDA
events (GPU time only: no host dispatch); ``eager_ms`` times plain calls (host
dispatch included). On CPU both fall back to wall-clock timing, which only the tests
use (to check the code paths run).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from nightjar.roofline.hardware import ModelArch


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def graph_ms(fn: Callable[[], object], device: torch.device, reps: int = 5) -> float:
    """Median time of one replay of ``fn`` captured in a CUDA graph (ms)."""
    if device.type != "cuda":
        return eager_ms(fn, device, reps)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # warm-up off the capture stream, as CUDA graphs need
        for _ in range(2):
            fn()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    _sync(device)
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return statistics.median(times)


def eager_ms(fn: Callable[[], object], device: torch.device, reps: int = 5) -> float:
    """Median wall time of one plain call of ``fn``, synchronised (ms)."""
    for _ in range(2):
        fn()
    _sync(device)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


class Decoder:
    """Weights and a KV cache for ``batch`` sequences of up to ``max_len`` positions."""

    def __init__(
        self, s: ModelArch, batch: int, max_len: int, device: torch.device, dtype: torch.dtype
    ) -> None:
        self.s, self.device, self.dtype = s, device, dtype
        gen = torch.Generator(device=device).manual_seed(0)

        def w(*shape: int) -> torch.Tensor:
            t = torch.empty(*shape, device=device, dtype=dtype)
            return t.normal_(0.0, 0.02, generator=gen)

        q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
        self.layers = [
            {
                "qkv": w(q + 2 * kv, s.hidden),
                "qkv_b": w(q + 2 * kv) if s.qkv_bias else None,
                "o": w(s.hidden, q),
                "gate_up": w(2 * s.intermediate, s.hidden),
                "down": w(s.hidden, s.intermediate),
                "n1": torch.ones(s.hidden, device=device, dtype=dtype),
                "n2": torch.ones(s.hidden, device=device, dtype=dtype),
            }
            for _ in range(s.layers)
        ]
        self.embed = w(s.vocab, s.hidden)
        self.head = self.embed if s.tied_embeddings else w(s.vocab, s.hidden)
        self.norm = torch.ones(s.hidden, device=device, dtype=dtype)
        cache = (s.layers, batch, s.kv_heads, max_len, s.head_dim)
        self.k = w(*cache)
        self.v = w(*cache)
        inv = 1.0 / (10000.0 ** (torch.arange(0, s.head_dim, 2, device=device) / s.head_dim))
        self.freqs = inv.float()

    def _rope(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        angles = pos.float()[:, None] * self.freqs[None, :]  # [tokens, head_dim / 2]
        cos = angles.cos().to(x.dtype)[:, None, :]
        sin = angles.sin().to(x.dtype)[:, None, :]
        a, b = x.chunk(2, dim=-1)
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

    def forward(self, ids: torch.Tensor, start: int) -> torch.Tensor:
        """``ids`` [batch, n] at positions start..start+n-1; returns last-position logits.

        n = 1 is a decode step of every sequence; batch = 1 with n > 1 a prefill.
        """
        s = self.s
        bsz, n = ids.shape
        q_w, kv_w = s.heads * s.head_dim, s.kv_heads * s.head_dim
        pos = torch.arange(start, start + n, device=self.device)
        x = F.embedding(ids, self.embed).reshape(bsz * n, s.hidden)
        end = start + n
        for i, layer in enumerate(self.layers):
            h = F.rms_norm(x, (s.hidden,), layer["n1"])
            qkv = F.linear(h, layer["qkv"], layer["qkv_b"])
            q, k, v = qkv.split((q_w, kv_w, kv_w), dim=-1)
            q = self._rope(q.reshape(bsz * n, s.heads, s.head_dim), pos.repeat(bsz))
            k = self._rope(k.reshape(bsz * n, s.kv_heads, s.head_dim), pos.repeat(bsz))
            kc, vc = self.k[i, :bsz], self.v[i, :bsz]
            kc[:, :, start:end] = k.reshape(bsz, n, s.kv_heads, s.head_dim).transpose(1, 2)
            vc[:, :, start:end] = v.reshape(bsz, n, s.kv_heads, s.head_dim).transpose(1, 2)
            attn = F.scaled_dot_product_attention(
                q.reshape(bsz, n, s.heads, s.head_dim).transpose(1, 2),
                kc[:, :, :end],
                vc[:, :, :end],
                is_causal=n > 1 and start == 0,
                enable_gqa=s.heads != s.kv_heads,
            )
            x = x + F.linear(attn.transpose(1, 2).reshape(bsz * n, q_w), layer["o"])
            h = F.rms_norm(x, (s.hidden,), layer["n2"])
            gate, up = F.linear(h, layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        last = x.reshape(bsz, n, s.hidden)[:, -1]
        return F.linear(F.rms_norm(last, (s.hidden,), self.norm), self.head)


def kernel_count(fn: Callable[[], object], device: torch.device) -> int:
    """How many GPU kernels one call of ``fn`` launches (torch profiler); 0 on CPU."""
    if device.type != "cuda":
        return 0
    from torch.profiler import ProfilerActivity, profile

    fn()
    _sync(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        _sync(device)
    # Device-side events are the kernels (and memsets); host events are the launches.
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def gib(nbytes: float) -> float:
    return nbytes / 2**30


def cache_bytes(s: ModelArch, batch: int, max_len: int, dtype_bytes: int = 2) -> int:
    return 2 * s.layers * batch * s.kv_heads * max_len * s.head_dim * dtype_bytes


def weight_bytes(s: ModelArch, dtype_bytes: int = 2) -> int:
    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    layer = (q + 2 * kv) * s.hidden + q * s.hidden + 3 * s.hidden * s.intermediate
    embed = s.vocab * s.hidden * (1 if s.tied_embeddings else 2)
    return (s.layers * layer + embed) * dtype_bytes

