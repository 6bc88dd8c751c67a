"""Draft weights that live inside the KV ballast region (aliasing), with checksums.

The ballast is the tail ``region`` of block ids that the scheduler withholds while
the draft is resident (:mod:`nightjar.live.residency.ballast`). In vLLM 0.32.0 every
layer's KV cache has the block id as its outermost physical axis (CPU: always;
CUDA: FlashAttention's default), so the region's slice of one layer is one
contiguous chunk of bytes, and the region is one such chunk per layer, never one
span across layers (see docs/kernels.md for the drawing). :class:`AliasedParking`
places each draft parameter whole inside one chunk where it fits (largest first,
first fit, ``align``-byte aligned) and rebinds the parameter to that view; a
parameter larger than any chunk's free space (a large vocabulary's embedding and
LM head) is split by rows over several chunks, and the modules that own it read
it piece by piece (:func:`chunked_embedding`, :func:`chunked_linear`: pure torch,
CPU and CUDA). So the region is the draft's bytes plus alignment, and the draft's
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
from typing import Any

import torch

# A split tensor's pieces start at multiples of this many rows. Measured on CPU
# float32 (MKL): concatenating F.linear over pieces of 16k rows equals the whole
# GEMM bit for bit at every M tried; pieces of 1-15 or 17 rows did not (the GEMM's
# tail columns take another kernel). It also keeps pieces from being slivers.
PIECE_ROWS = 16
# Bytes hashed per step of the checksum (bounds its temporary memory).
_CHUNK = 1 << 24
_MOD = 65521


class WeightCorruption(RuntimeError):
    """A draft weight's bytes differ from the checksum taken when they were placed."""


def checksum(*parts: torch.Tensor) -> tuple[int, int]:
    """A position-weighted (Fletcher-like) sum of the bytes of ``parts`` read in order.

    Computed on the parts' device. Any change of one byte changes it; a swap of two
    bytes changes the weighted sum. The parts of a row-split tensor give the same
    sum as the whole tensor (positions run on across parts).
    """
    plain = weighted = 0
    base = 0
    for t in parts:
        flat = t.detach().reshape(-1).view(torch.uint8)
        for start in range(0, flat.numel(), _CHUNK):
            part = flat[start : start + _CHUNK].to(torch.int64)
            pos = torch.arange(
                base + start, base + start + part.numel(), device=part.device, dtype=torch.int64
            )
            plain += int(part.sum())
            weighted += int((part * (pos % _MOD + 1)).sum())
        base += flat.numel()
    return plain, weighted


@dataclass(frozen=True, slots=True)
class Slot:
    chunk: int  # index of the layer whose region chunk holds the tensor (or its rows)
    offset: int  # byte offset inside that chunk
    nbytes: int
    row: int = 0  # first row (dim 0) of the tensor held here; 0 for a whole tensor


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


def _aligned(n: int, align: int) -> int:
    return -(-n // align) * align


def plan_slots(
    sizes: Sequence[int],
    capacity: Sequence[int],
    align: int,
    row_bytes: Sequence[int] | None = None,
) -> list[tuple[Slot, ...]]:
    """Place tensors of ``sizes`` bytes into chunks of ``capacity`` bytes.

    Largest first; a tensor goes whole into the first chunk where it fits. One that
    fits in none is split by rows (dim 0, ``row_bytes[i]`` bytes each; 0 means it
    cannot be split) over the chunks' free space in chunk order, each piece a
    multiple of :data:`PIECE_ROWS` rows (the last one: what is left). Every slot
    starts ``align``-aligned. Returns the slots of each tensor (one for a whole
    tensor, rows ascending for a split one). Raises
    ``ValueError`` when they do not fit (:func:`blocks_needed` sizes the region).
    """
    rows_of = list(row_bytes) if row_bytes is not None else [0] * len(sizes)
    used = [0] * len(capacity)
    slots: list[tuple[Slot, ...]] = [()] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda j: -sizes[j]):
        for c, cap in enumerate(capacity):
            start = _aligned(used[c], align)
            if start + sizes[i] <= cap:
                slots[i] = (Slot(c, start, sizes[i]),)
                used[c] = start + sizes[i]
                break
        else:
            slots[i] = _split(i, sizes[i], rows_of[i], capacity, used, align)
    return slots


def _split(
    i: int, size: int, row: int, capacity: Sequence[int], used: list[int], align: int
) -> tuple[Slot, ...]:
    if row <= 0 or size % row:
        raise ValueError(f"a {size}-byte tensor fits in no region chunk")
    left, first, pieces = size // row, 0, []
    for c, cap in enumerate(capacity):
        start = _aligned(used[c], align)
        take = min(left, max(0, cap - start) // row)
        if take < left:
            take -= take % PIECE_ROWS
        if take:
            pieces.append(Slot(c, start, take * row, first))
            used[c] = start + take * row
            first, left = first + take, left - take
        if not left:
            return tuple(pieces)
    raise ValueError(f"a {size}-byte tensor fits in no region chunk, even split by rows")


# How far above the bytes' share the region may grow to split only the tensors that
# must be split (larger than a whole chunk) rather than also some layer's linears.
SPLIT_SLACK = 0.05


def plan_region(
    sizes: Sequence[int],
    capacity: Sequence[int],
    align: int,
    row_bytes: Sequence[int] | None = None,
) -> list[tuple[Slot, ...]]:
    """:func:`plan_slots`, splitting as few tensors as it can.

    First only the tensors larger than every chunk may be split (the embedding and
    LM head of a large vocabulary); if that does not fit, every tensor with
    ``row_bytes`` may be. Fewer split tensors means fewer chunked paths at run time.
    """
    rows = list(row_bytes) if row_bytes is not None else [0] * len(sizes)
    most = max(capacity, default=0)
    must = [r if s > most else 0 for s, r in zip(sizes, rows, strict=True)]
    try:
        return plan_slots(sizes, capacity, align, must)
    except ValueError:
        return plan_slots(sizes, capacity, align, rows)


def blocks_needed(
    sizes: Sequence[int],
    block_bytes: Sequence[int],
    align: int,
    row_bytes: Sequence[int] | None = None,
) -> int:
    """The fewest region blocks (per layer) that hold tensors of ``sizes`` bytes.

    ``block_bytes``: one block's bytes in each layer; ``row_bytes`` as in
    :func:`plan_slots`. Splitting only the tensors larger than a chunk when that
    costs at most :data:`SPLIT_SLACK` over the bytes' share, else splitting more
    (:func:`plan_region` makes the same choice for the returned size). Without
    ``row_bytes`` (whole tensors only) the region can be many times the bytes.
    """
    share = max(1, -(-sum(sizes) // sum(block_bytes)))
    rows = list(row_bytes) if row_bytes is not None else [0] * len(sizes)

    def fits(n: int, allowed: Sequence[int]) -> bool:
        try:
            plan_slots(sizes, [n * b for b in block_bytes], align, allowed)
            return True
        except ValueError:
            return False

    for n in range(share, int(share * (1 + SPLIT_SLACK)) + 1):
        most = n * max(block_bytes)
        if fits(n, [r if s > most else 0 for s, r in zip(sizes, rows, strict=True)]):
            return n
    n = share
    while not fits(n, rows):
        n += 1
    return n


def splittable_rows(t: torch.Tensor) -> int:
    """Bytes of one row (dim 0) of ``t``; 0 for tensors not worth splitting (1-D)."""
    if t.dim() < 2 or t.shape[0] == 0:
        return 0
    return int(t.numel() // t.shape[0]) * int(t.element_size())


class AliasedParking:
    """The drafter's parameters as views into the KV ballast region (see module doc).

    ``split``: whether parameters too large for one layer's chunk may be split by
    rows over several chunks. Only parameters whose every owning module has a
    chunked path (:func:`chunked_owners`) are split; their modules are switched to
    it. A split parameter's ``.data`` is an empty ``(0, ...)`` tensor; its rows are
    the views :meth:`pieces` returns.
    """

    def __init__(
        self,
        module: torch.nn.Module,
        kv_caches: Sequence[torch.Tensor],
        region: range,
        align: int = 64,
        split: bool = True,
    ) -> None:
        # remove_duplicate: a tied weight is placed once.
        self.region = region
        self._params = list(module.named_parameters(remove_duplicate=True))
        self._chunks = region_chunks(kv_caches, region)
        owners = chunked_owners(module) if split else {}
        sizes = [p.numel() * p.element_size() for _, p in self._params]
        rows = [splittable_rows(p) if id(p) in owners else 0 for _, p in self._params]
        planned = plan_region(sizes, [c.numel() for c in self._chunks], align, rows)
        self._slots = dict(zip((n for n, _ in self._params), planned, strict=True))
        self._shapes = {n: (p.shape, p.dtype) for n, p in self._params}
        self._names = {id(p): n for n, p in self._params}
        self._host: dict[str, torch.Tensor] = {}
        self._views: dict[str, list[tuple[int, torch.Tensor]]] = {}
        self._firsts: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for name, p in self._params:
                self._views[name] = self._place(name)
                for row, view in self._views[name]:
                    view.copy_(p.data[row : row + view.shape[0]])
                self._bind(name, p)  # the original storage is freed with its last reference
        self._sums = {n: checksum(*(v for _, v in self._views[n])) for n, _ in self._params}
        for _, p in self._params:
            if self.is_split(p):
                for m in owners[id(p)]:
                    _use_pieces(m, self, p)

    def _place(self, name: str) -> list[tuple[int, torch.Tensor]]:
        shape, dtype = self._shapes[name]
        rest = tuple(shape[1:])
        views = []
        for slot in self._slots[name]:
            raw = self._chunks[slot.chunk][slot.offset : slot.offset + slot.nbytes]
            if len(self._slots[name]) == 1:
                views.append((0, raw.view(dtype).view(shape)))
            else:
                views.append((slot.row, raw.view(dtype).view((-1, *rest))))
        return views

    def _bind(self, name: str, p: torch.Tensor) -> None:
        views = self._views[name]
        if len(views) == 1:
            p.data = views[0][1]
        else:
            shape, dtype = self._shapes[name]
            p.data = torch.empty((0, *shape[1:]), dtype=dtype, device=views[0][1].device)

    def is_split(self, p: torch.Tensor) -> bool:
        return len(self._slots[self._names[id(p)]]) > 1

    def pieces(self, p: torch.Tensor) -> list[tuple[int, torch.Tensor]]:
        """``(first row, view)`` for each piece of parameter ``p``, rows ascending."""
        if self.parked:
            raise RuntimeError("nightjar: the aliased draft is parked; it cannot run")
        return self._views[self._names[id(p)]]

    def firsts(self, p: torch.Tensor) -> torch.Tensor:
        """The first rows of ``p``'s pieces, as a tensor on its device (made once)."""
        name = self._names[id(p)]
        if name not in self._firsts:
            views = self._views[name]
            rows = [r for r, _ in views]
            self._firsts[name] = torch.tensor(rows, dtype=torch.int64, device=views[0][1].device)
        return self._firsts[name]

    @property
    def block_bytes(self) -> int:
        """One block's bytes summed over the layers: the region's bytes per block."""
        return int(sum(c.numel() for c in self._chunks)) // max(1, len(self.region))

    @property
    def split_names(self) -> list[str]:
        return [n for n, _ in self._params if len(self._slots[n]) > 1]

    @property
    def parked(self) -> bool:
        return bool(self._host)

    @property
    def parked_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._host.values())

    @property
    def resident_bytes(self) -> int:
        if self.parked:
            return 0
        return sum(s.nbytes for slots in self._slots.values() for s in slots)

    def inside_region(self) -> bool:
        """Whether every parameter's bytes lie inside the region's chunks right now."""
        spans = [(c.data_ptr(), c.data_ptr() + c.numel()) for c in self._chunks]
        for name, p in self._params:
            views = [p.data] if p.numel() else [v for _, v in self._views[name]]
            if len(views) != len(self._slots[name]):
                return False
            for v in views:
                lo = v.data_ptr()
                hi = lo + v.numel() * v.element_size()
                if v.numel() == 0 or not any(a <= lo and hi <= b for a, b in spans):
                    return False
        return True

    def _verify(self, name: str, parts: Sequence[torch.Tensor], when: str) -> None:
        if checksum(*parts) != self._sums[name]:
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
            for name, _ in self._params:
                shape, dtype = self._shapes[name]
                copy = torch.empty(shape, dtype=dtype, device="cpu", pin_memory=cuda)
                for row, view in self._views[name]:
                    copy[row : row + view.shape[0]].copy_(view, non_blocking=cuda)
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
            self._verify(name, [host[name]], "while resident in the KV region")
        return self.parked_bytes

    def restore(self) -> int:
        """Copy the weights back into their region slots, verified; returns the bytes."""
        if not self.parked:
            return 0
        moved = self.parked_bytes
        with torch.no_grad():
            for name, _ in self._params:
                src = self._host[name]
                for row, view in self._views[name]:
                    view.copy_(src[row : row + view.shape[0]], non_blocking=True)
            for name, _ in self._params:
                views = [v for _, v in self._views[name]]
                self._verify(name, views, "on its way back into the KV region")
            for name, p in self._params:
                self._bind(name, p)
        self._host = {}
        return moved


def chunked_embedding(
    ids: torch.Tensor,
    pieces: Sequence[tuple[int, torch.Tensor]],
    firsts: torch.Tensor | None = None,
) -> torch.Tensor:
    """``F.embedding(ids, W)`` for ``W`` given as row pieces; bitwise equal to it.

    One clamped lookup per piece, stacked, then each id takes the row of the piece
    that holds it (a gather): about ``len(pieces) + 8`` kernels, none with a
    data-dependent shape, so it can be captured in a CUDA graph. ``firsts``: the
    pieces' first rows as an int64 tensor on ``ids``' device (:class:`AliasedParking`
    keeps one; built here when not given, which a graph capture must not do).
    """
    if len(pieces) == 1:
        return torch.nn.functional.embedding(ids, pieces[0][1])
    if firsts is None:
        firsts = torch.tensor([f for f, _ in pieces], dtype=torch.int64, device=ids.device)
    flat = ids.reshape(-1)
    local = flat.unsqueeze(0) - firsts.unsqueeze(1)  # [pieces, tokens]
    which = (local >= 0).sum(0) - 1  # the last piece starting at or before the id
    rows = torch.stack(
        [
            torch.nn.functional.embedding(local[i].clamp(0, w.shape[0] - 1), w)
            for i, (_, w) in enumerate(pieces)
        ]
    )
    index = which.view(1, -1, 1).expand(1, flat.numel(), rows.shape[-1])
    return rows.gather(0, index).view(*ids.shape, rows.shape[-1])


def chunked_linear(
    x: torch.Tensor,
    pieces: Sequence[tuple[int, torch.Tensor]],
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``F.linear(x, W, bias)`` for ``W`` given as row (output-feature) pieces.

    The outputs of the pieces concatenated. Bitwise equal to the whole GEMM where
    the GEMM's reduction order does not depend on the number of output columns
    (measured: tests/live/test_alias.py, experiments/alias_chunked.py).
    """
    linear = torch.nn.functional.linear
    outs = []
    for first, w in pieces:
        b = None if bias is None else bias[first : first + w.shape[0]]
        outs.append(linear(x, w, b))
    return torch.cat(outs, dim=-1)


class _PiecesMethod:
    """A vLLM quant method whose ``embedding``/``apply`` read the weight's pieces."""

    def __init__(self, inner: Any, parking: AliasedParking, weight: torch.Tensor) -> None:
        self.inner = inner
        self.parking = parking
        self.weight = weight

    def embedding(self, layer: torch.nn.Module, input_: torch.Tensor) -> torch.Tensor:
        pieces = self.parking.pieces(self.weight)
        return chunked_embedding(input_, pieces, self.parking.firsts(self.weight))

    def apply(
        self, layer: torch.nn.Module, x: torch.Tensor, bias: torch.Tensor | None = None
    ) -> torch.Tensor:
        return chunked_linear(x, self.parking.pieces(self.weight), bias)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _plain_method(m: torch.nn.Module) -> bool:
    """Whether ``m``'s vLLM quant method reads ``m.weight`` as a plain dense matrix."""
    method = getattr(m, "quant_method", None)
    return type(method).__name__ in ("UnquantizedLinearMethod", "UnquantizedEmbeddingMethod")


def chunked_owners(module: torch.nn.Module) -> dict[int, list[torch.nn.Module]]:
    """Parameters (by ``id``) that may be split: every module owning one has a chunked path.

    vLLM's unquantized linears, embeddings and LM heads (through their quant
    method), torch's ``nn.Linear`` and ``nn.Embedding`` (plain lookups only).
    """
    owners: dict[int, list[torch.nn.Module]] = {}
    refused: set[int] = set()
    for m in module.modules():
        for pname, p in m.named_parameters(recurse=False):
            ok = pname == "weight" and p.dim() == 2 and (
                _plain_method(m)
                or type(m) is torch.nn.Linear
                or (type(m) is torch.nn.Embedding and m.max_norm is None)
            )
            if ok:
                owners.setdefault(id(p), []).append(m)
            else:
                refused.add(id(p))
    return {k: v for k, v in owners.items() if k not in refused}


def _use_pieces(m: torch.nn.Module, parking: AliasedParking, p: torch.Tensor) -> None:
    if _plain_method(m):
        m.quant_method = _PiecesMethod(m.quant_method, parking, p)
    elif type(m) is torch.nn.Linear:
        lin = m

        def forward_linear(x: torch.Tensor) -> torch.Tensor:
            return chunked_linear(x, parking.pieces(p), lin.bias)

        m.forward = forward_linear
    else:

        def forward_embedding(ids: torch.Tensor) -> torch.Tensor:
            return chunked_embedding(ids, parking.pieces(p), parking.firsts(p))

        m.forward = forward_embedding


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
