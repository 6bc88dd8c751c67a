"""Draft weights that live inside the KV ballast region (aliasing), with checksums.

The ballast is the tail ``region`` of block ids that the scheduler withholds while
the draft is resident (:mod:`nightjar.live.residency.ballast`). In vLLM 0.32.0 every
layer's KV cache has the block id as its outermost physical axis (CPU: always;
CUDA: FlashAttention's default), so the region's slice of one layer is one
contiguous chunk of bytes, and the region is one such chunk per layer, never one
span across layers (see docs/kernels.md for the drawing). :class:`AliasedParking`
places each draft parameter whole inside one chunk (largest first, first fit,
``align``-byte aligned) and rebinds the parameter to that view, so the draft's
resident bytes *are* the withheld KV bytes: no second allocation exists.

- ``park()`` (offload): copies every parameter to host memory (pinned on CUDA),
  verifies each copy against the checksum taken when the weights were placed,
  and empties the parameters. The region's bytes then belong to the KV pool.
- ``restore()`` (reload, only once the scheduler has emptied the region): copies
  the host copies back into their slots, verifies the slots' bytes, and rebinds.

A mismatch raises :class:`WeightCorruption`: at park time it means something
wrote into the region while the draft was resident (a block handed out that must
not be, the silent load-dependent corruption the reservation prevents); at
restore time that the copy back went wrong. The parameters stay parked after a
failed restore, so the engine serves without speculation instead of with bad
weights (target verification keeps output right either way, but acceptance
would silently drop to ~0, measured).

Invariants: while resident every parameter's storage is the KV buffer's; while
parked every parameter is empty and the host copy matches the checksum.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

# Bytes hashed per step of the checksum (bounds its temporary memory).
_CHUNK = 1 << 24
_MOD = 65521


class WeightCorruption(RuntimeError):
    """A draft weight's bytes differ from the checksum taken when they were placed."""


def checksum(t: torch.Tensor) -> tuple[int, int]:
    """A position-weighted (Fletcher-like) sum of ``t``'s bytes, computed on its device.

    Any change of one byte changes it; a swap of two bytes changes the weighted sum.
    """
    flat = t.detach().reshape(-1).view(torch.uint8)
    plain = weighted = 0
    for start in range(0, flat.numel(), _CHUNK):
        part = flat[start : start + _CHUNK].to(torch.int64)
        pos = torch.arange(start, start + part.numel(), device=part.device, dtype=torch.int64)
        plain += int(part.sum())
        weighted += int((part * (pos % _MOD + 1)).sum())
    return plain, weighted


@dataclass(frozen=True, slots=True)
class Slot:
    chunk: int  # index of the layer whose region chunk holds the tensor
    offset: int  # byte offset inside that chunk
    nbytes: int


def region_chunks(kv_caches: Sequence[torch.Tensor], region: range) -> list[torch.Tensor]:
    """Each layer's slice of the block-id ``region`` as a flat byte tensor (a view)."""
    chunks = []
    for i, cache in enumerate(kv_caches):
        part = cache[region.start : region.stop]
        if not part.is_contiguous():
            raise ValueError(
                f"layer {i}: the region's blocks are not one contiguous chunk (layout "
                f"strides {tuple(cache.stride())}); aliasing needs blocks-first layouts"
            )
        chunks.append(part.reshape(-1).view(torch.uint8))
    return chunks


def plan_slots(sizes: Sequence[int], capacity: Sequence[int], align: int) -> list[Slot]:
    """Place tensors of ``sizes`` bytes into chunks of ``capacity`` bytes.

    Largest first, first fit; each slot starts ``align``-aligned. Raises
    ``ValueError`` when they do not fit (:func:`blocks_needed` sizes the region).
    """
    used = [0] * len(capacity)
    slots: list[Slot | None] = [None] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda j: -sizes[j]):
        for c, cap in enumerate(capacity):
            start = -(-used[c] // align) * align
            if start + sizes[i] <= cap:
                slots[i] = Slot(c, start, sizes[i])
                used[c] = start + sizes[i]
                break
        else:
            raise ValueError(f"a {sizes[i]}-byte tensor fits in no region chunk")
    return [s for s in slots if s is not None]


def blocks_needed(sizes: Sequence[int], block_bytes: Sequence[int], align: int) -> int:
    """The fewest region blocks (per layer) that hold tensors of ``sizes`` bytes.

    ``block_bytes``: one block's bytes in each layer. At least the bytes' share;
    more when the largest tensor does not fit one layer's chunk otherwise.
    """
    total = sum(sizes) + align * len(sizes)
    n = max(1, -(-total // sum(block_bytes)))
    while True:
        try:
            plan_slots(sizes, [n * b for b in block_bytes], align)
            return n
        except ValueError:
            n += 1


class AliasedParking:
    """The drafter's parameters as views into the KV ballast region (see module doc)."""

    def __init__(
        self,
        module: torch.nn.Module,
        kv_caches: Sequence[torch.Tensor],
        region: range,
        align: int = 64,
    ) -> None:
        # remove_duplicate: a tied weight is placed once.
        self.region = region
        self._params = list(module.named_parameters(remove_duplicate=True))
        self._chunks = region_chunks(kv_caches, region)
        sizes = [p.numel() * p.element_size() for _, p in self._params]
        self._slots = plan_slots(sizes, [c.numel() for c in self._chunks], align)
        self._host: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for (_, p), slot in zip(self._params, self._slots, strict=True):
                view = self._view(p, slot)
                view.copy_(p.data)
                p.data = view  # the original storage is freed with its last reference
        self._sums = {name: checksum(p.data) for name, p in self._params}

    def _view(self, p: torch.Tensor, slot: Slot) -> torch.Tensor:
        raw = self._chunks[slot.chunk][slot.offset : slot.offset + slot.nbytes]
        return raw.view(p.dtype).view(p.shape)

    @property
    def parked(self) -> bool:
        return bool(self._host)

    @property
    def parked_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._host.values())

    @property
    def resident_bytes(self) -> int:
        return 0 if self.parked else sum(s.nbytes for s in self._slots)

    def inside_region(self) -> bool:
        """Whether every parameter's bytes lie inside the region's chunks right now."""
        spans = [(c.data_ptr(), c.data_ptr() + c.numel()) for c in self._chunks]
        for _, p in self._params:
            lo = p.data_ptr()
            hi = lo + p.numel() * p.element_size()
            if p.numel() == 0 or not any(a <= lo and hi <= b for a, b in spans):
                return False
        return True

    def _verify(self, name: str, t: torch.Tensor, when: str) -> None:
        if checksum(t) != self._sums[name]:
            raise WeightCorruption(
                f"nightjar: draft weight {name} changed {when} (checksum mismatch); "
                "it will not be served"
            )

    def park(self) -> int:
        """Copy the weights out of the region, verified; returns the bytes moved."""
        if self.parked:
            return 0
        cuda = self._chunks[0].device.type == "cuda" if self._chunks else False
        host: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for name, p in self._params:
                copy = torch.empty(p.shape, dtype=p.dtype, device="cpu", pin_memory=cuda)
                copy.copy_(p.data, non_blocking=cuda)
                host[name] = copy
            if cuda:
                torch.cuda.current_stream(self._chunks[0].device).synchronize()
            # Parked even when a check below fails: the region goes back to the KV
            # pool either way, and a bad host copy then fails every restore, so the
            # corrupted weights are never served again.
            for _, p in self._params:
                p.data = torch.empty(0, dtype=p.dtype, device=p.device)
        self._host = host
        for name, _ in self._params:
            self._verify(name, host[name], "while resident in the KV region")
        return self.parked_bytes

    def restore(self) -> int:
        """Copy the weights back into their region slots, verified; returns the bytes."""
        if not self.parked:
            return 0
        moved = self.parked_bytes
        with torch.no_grad():
            views = []
            for (name, _), slot in zip(self._params, self._slots, strict=True):
                view = self._view(self._host[name], slot)
                view.copy_(self._host[name], non_blocking=True)
                views.append(view)
            for (name, _), view in zip(self._params, views, strict=True):
                self._verify(name, view, "on its way back into the KV region")
            for (_, p), view in zip(self._params, views, strict=True):
                p.data = view
        self._host = {}
        return moved


def plain_linears(module: torch.nn.Module) -> int:
    """On vLLM's CPU backend, make every linear of ``module`` read its weight parameter.

    vLLM 0.32.0 (``dispatch_cpu_unquantized_gemm``) copies each linear's weight into
    a prepacked handle (oneDNN or sgl) that its ``cpu_linear`` reads, and empties the
    parameter of plain linears (lm_head keeps it: it is also the embedding table).
    Aliasing needs the parameter to be what the layer reads, so the weight is
    recovered from the handle (an identity input through the prepacked GEMM gives
    ``W^T``: every output is one weight times 1 plus zeros, exact in float32), checked
    on a random input, and ``cpu_linear`` becomes plain ``F.linear``; the handle is
    dropped with it. Returns how many layers changed. Measured cost: the draft's
    linears run 1.7-20x slower for M >= 4 tokens (docs/kernels.md).
    """
    changed = 0
    linear = torch.nn.functional.linear
    with torch.no_grad():
        for m in module.modules():
            fn = getattr(m, "cpu_linear", None)
            weight = getattr(m, "weight", None)
            if fn is None or fn is linear or not isinstance(weight, torch.Tensor):
                continue
            bias = getattr(m, "bias", None)
            if weight.numel() == 0:
                k = int(getattr(m, "input_size_per_partition", 0) or m.input_size)
                eye = torch.eye(k, dtype=weight.dtype, device=weight.device)
                weight.data = fn(eye, weight, None).t().contiguous()
            x = torch.randn(3, weight.shape[1], dtype=weight.dtype, device=weight.device)
            if not torch.allclose(fn(x, weight, bias), linear(x, weight, bias), atol=1e-4):
                raise RuntimeError(f"nightjar: could not recover the weight of {type(m).__name__}")
            m.cpu_linear = linear
            changed += 1
    return changed
