"""Device-side data movement for draft residency: KV block migration, weight packing.

``migrate_blocks(kv_caches, pairs)``
    Copies KV block ``src`` to block ``dst`` for every ``(src, dst)`` pair in every
    layer. ``kv_caches`` are vLLM V1's per-layer cache views (dim 0 = block id):
    vLLM 0.32.0 gives each attention layer a logical ``[num_blocks, num_kv_heads,
    block_size, 2 * head_size]`` view (K and V side by side in the last dim) whose
    strides follow the resolved ``KVCacheLayout`` (CPU backend: ``LBHNC``, i.e.
    contiguous per layer; FlashAttention on CUDA: ``LBNHC`` by default, i.e.
    physically ``[num_blocks, block_size, num_kv_heads, 2 * head_size]``; ``BL..``
    layouts interleave layers per block). Any strided view works: a block is
    described as a set of contiguous byte runs, computed from its strides. Plans
    must satisfy :func:`nightjar.live.kernels.compaction.check_pairs` (no chained moves).

``pack(params, buffer, offsets)`` / ``unpack(params, buffer, offsets)``
    Gather contiguous tensors into a flat buffer at the given byte offsets, and
    scatter them back (exact, bitwise). :func:`pack_offsets` lays tensors out.

Dispatch (``backend="auto"``): the Triton kernels (one launch per group of
same-layout layers; one launch per word width for all parameters) run when the
tensors are on CUDA, or on CPU tensors when ``TRITON_INTERPRET=1`` was set when
:mod:`nightjar.live.kernels.triton_impl` was first imported (the Triton interpreter,
which is how the tests check the kernels here; the mode is fixed at that import).
Otherwise the torch fallback runs (``index_copy_`` / slice copies), which the
tests also compare with. ``backend="torch"`` / ``"triton"`` force one. See
docs/kernels.md.

Kernels are ordinary launches on the current stream: callers order them with the
forward passes that read the same memory exactly as they would a torch copy.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from itertools import pairwise, product
from typing import Literal

import torch

from nightjar.live.kernels.compaction import Pair, check_pairs

Backend = Literal["auto", "triton", "torch"]


def triton_usable(device: torch.device) -> bool:
    """Whether the Triton kernels can run on tensors living on ``device``."""
    if importlib.util.find_spec("triton") is None:
        return False
    from nightjar.live.kernels.triton_impl import INTERPRET

    # The interpreter dereferences the kernels' raw addresses on the host, and a
    # compiled kernel needs a GPU: each mode fits exactly one kind of tensor.
    return bool(device.type == ("cpu" if INTERPRET else "cuda"))


def _use_triton(device: torch.device, backend: Backend) -> bool:
    if backend == "auto":
        return triton_usable(device)
    if backend == "triton" and not triton_usable(device):
        raise ValueError(f"the Triton kernels cannot run on {device} in this process")
    return backend == "triton"


def block_runs(cache: torch.Tensor) -> tuple[list[int], int]:
    """One block of ``cache`` as contiguous byte runs: (run offsets, run length).

    Inner dims are ordered by stride and merged where they are contiguous, so a
    dense block (every vLLM layout but ``LHBNC``/``BHLNC``) is a single run.
    """
    elem = cache.element_size()
    dims = sorted(
        ((n, s * elem) for n, s in zip(cache.shape[1:], cache.stride()[1:], strict=True) if n > 1),
        key=lambda d: d[1],
    )
    run = elem
    while dims and dims[0][1] == run:
        run *= dims.pop(0)[0]
    # What is left are the dims that step between runs.
    offsets = [
        sum(i * s for i, (_, s) in zip(idx, dims, strict=True))
        for idx in product(*(range(n) for n, _ in dims))
    ]
    return offsets, run


def _group_key(t: torch.Tensor) -> tuple[object, ...]:
    return (t.device, t.dtype, tuple(t.shape), tuple(t.stride()))


def migrate_blocks(
    kv_caches: Sequence[torch.Tensor], pairs: Sequence[Pair], backend: Backend = "auto"
) -> None:
    """Copy block ``src`` to ``dst`` in every layer, for every pair (see module doc)."""
    if not pairs or not kv_caches:
        return
    check_pairs(pairs, min(t.shape[0] for t in kv_caches))
    groups: dict[tuple[object, ...], list[torch.Tensor]] = {}
    for t in kv_caches:
        groups.setdefault(_group_key(t), []).append(t)
    for layers in groups.values():
        device = layers[0].device
        src = torch.tensor([s for s, _ in pairs], dtype=torch.int64, device=device)
        dst = torch.tensor([d for _, d in pairs], dtype=torch.int64, device=device)
        if _use_triton(device, backend):
            from nightjar.live.kernels.triton_impl import migrate_group

            offsets, run = block_runs(layers[0])
            migrate_group(layers, src, dst, offsets, run)
        else:
            for t in layers:
                # Sources and destinations are disjoint (check_pairs), so gathering
                # first and scattering after equals copying pair by pair.
                t.index_copy_(0, dst, t.index_select(0, src))


def pack_offsets(params: Sequence[torch.Tensor], align: int = 256) -> tuple[list[int], int]:
    """Byte offsets placing ``params`` back to back, each ``align``-aligned; and the total."""
    offsets: list[int] = []
    end = 0
    for p in params:
        start = -(-end // align) * align
        offsets.append(start)
        end = start + p.numel() * p.element_size()
    return offsets, end


def _byte_slots(
    params: Sequence[torch.Tensor], buffer: torch.Tensor, offsets: Sequence[int]
) -> list[tuple[torch.Tensor, int, int]]:
    """Validated ``(param, offset, nbytes)`` triples; the slots must not overlap."""
    if len(params) != len(offsets):
        raise ValueError(f"{len(params)} tensors but {len(offsets)} offsets")
    if not buffer.is_contiguous():
        raise ValueError("the pack buffer must be contiguous")
    size = buffer.numel() * buffer.element_size()
    slots = []
    for p, off in zip(params, offsets, strict=True):
        if not p.is_contiguous():
            raise ValueError(f"tensor of shape {tuple(p.shape)} is not contiguous")
        if p.device != buffer.device:
            raise ValueError(f"tensor on {p.device} but the buffer is on {buffer.device}")
        nbytes = p.numel() * p.element_size()
        if off < 0 or off + nbytes > size:
            raise ValueError(f"slot [{off}, {off + nbytes}) outside a buffer of {size} bytes")
        slots.append((p, off, nbytes))
    ordered = sorted(slots, key=lambda s: s[1])
    for (_, a, n), (_, b, _) in pairwise(ordered):
        if a + n > b:
            raise ValueError(f"slots at byte {a} and byte {b} overlap")
    return slots


def _copy(
    params: Sequence[torch.Tensor],
    buffer: torch.Tensor,
    offsets: Sequence[int],
    into_buffer: bool,
    backend: Backend,
) -> None:
    slots = _byte_slots(params, buffer, offsets)
    if not slots:
        return
    if _use_triton(buffer.device, backend):
        from nightjar.live.kernels.triton_impl import memcpy_chunks

        base = buffer.data_ptr()
        copies = [
            (p.data_ptr(), base + off, n) if into_buffer else (base + off, p.data_ptr(), n)
            for p, off, n in slots
        ]
        memcpy_chunks(copies, buffer.device)
        return
    flat = buffer.view(-1).view(torch.uint8)
    with torch.no_grad():
        for p, off, n in slots:
            raw = p.detach().reshape(-1).view(torch.uint8)
            if into_buffer:
                flat[off : off + n].copy_(raw)
            else:
                raw.copy_(flat[off : off + n])


def pack(
    params: Sequence[torch.Tensor],
    buffer: torch.Tensor,
    offsets: Sequence[int],
    backend: Backend = "auto",
) -> None:
    """Copy each tensor's bytes into ``buffer`` at its byte offset."""
    _copy(params, buffer, offsets, True, backend)


def unpack(
    params: Sequence[torch.Tensor],
    buffer: torch.Tensor,
    offsets: Sequence[int],
    backend: Backend = "auto",
) -> None:
    """Copy the bytes at each offset of ``buffer`` back into the tensor (inverse of pack)."""
    _copy(params, buffer, offsets, False, backend)
