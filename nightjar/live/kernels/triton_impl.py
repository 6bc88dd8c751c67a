"""The Triton side of :mod:`nightjar.live.kernels.ops`: two copy kernels and their launchers.

Both kernels address memory through raw byte addresses read from small int64
tables, so one launch covers every layer of a KV cache group (migration) or every
parameter of a model (packing), however many separate tensors that is. Words are
``WORD`` bytes wide (8, 4, 2 or 1): the widest width that divides every address,
stride and length of the launch, so a launch never issues a misaligned access.

Import this module only after deciding the execution mode: ``@triton.jit`` reads
``TRITON_INTERPRET`` when the kernels are defined (here, at import). Under the
interpreter a raw address is dereferenced on the host, so interpreted launches are
only correct for CPU tensors; :data:`INTERPRET` lets the dispatcher check.

Callers validate inputs (see :mod:`nightjar.live.kernels.ops`); the launchers here
only shape the launch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import triton
import triton.language as tl

INTERPRET = bool(triton.knobs.runtime.interpret)

# Words per inner-loop step, and words one program copies at most (a tile). Large
# tiles keep the interpreter (one Python iteration per program) fast; on a GPU a
# 32K-word tile is 256 KiB with 8-byte words, enough work per program to hide
# launch cost while leaving thousands of programs for a multi-gigabyte copy.
BLOCK = 1024
TILE = 32 * BLOCK


@triton.jit  # type: ignore[untyped-decorator, misc, unused-ignore]
def _word_ptr(addr: tl.tensor, WORD: tl.constexpr) -> tl.tensor:
    if WORD == 8:
        return addr.to(tl.pointer_type(tl.uint64))
    elif WORD == 4:
        return addr.to(tl.pointer_type(tl.uint32))
    elif WORD == 2:
        return addr.to(tl.pointer_type(tl.uint16))
    else:
        return addr.to(tl.pointer_type(tl.uint8))


@triton.jit  # type: ignore[untyped-decorator, misc, unused-ignore]
def _migrate_kernel(
    layer_addr: tl.tensor,  # int64[L]: byte address of block 0 of each layer
    src_ids: tl.tensor,  # int64[P]
    dst_ids: tl.tensor,  # int64[P]
    run_off: tl.tensor,  # int64[R]: word offset of each contiguous run inside a block
    num_pairs: tl.tensor,
    block_words: tl.tensor,  # the layers' block stride, in words
    run_words: tl.tensor,  # length of each run, in words
    BLOCK: tl.constexpr,
    TILE: tl.constexpr,
    WORD: tl.constexpr,
) -> None:
    # Grid: (layer * pair, run, tile within the run).
    lp = tl.program_id(0).to(tl.int64)
    layer = lp // num_pairs
    pair = lp % num_pairs
    base = _word_ptr(tl.load(layer_addr + layer), WORD)
    start = tl.load(run_off + tl.program_id(1)) + tl.program_id(2).to(tl.int64) * TILE
    src = base + tl.load(src_ids + pair) * block_words + start
    dst = base + tl.load(dst_ids + pair) * block_words + start
    left = tl.minimum(run_words - tl.program_id(2).to(tl.int64) * TILE, TILE)
    offs = tl.arange(0, BLOCK)
    for i in range(0, left, BLOCK):
        mask = i + offs < left
        tl.store(dst + i + offs, tl.load(src + i + offs, mask=mask), mask=mask)


@triton.jit  # type: ignore[untyped-decorator, misc, unused-ignore]
def _memcpy_kernel(
    src_addr: tl.tensor,  # int64[C]: byte address of each chunk's source
    dst_addr: tl.tensor,  # int64[C]
    words: tl.tensor,  # int64[C]: chunk length in words (at most TILE)
    BLOCK: tl.constexpr,
    WORD: tl.constexpr,
) -> None:
    c = tl.program_id(0)
    src = _word_ptr(tl.load(src_addr + c), WORD)
    dst = _word_ptr(tl.load(dst_addr + c), WORD)
    n = tl.load(words + c)
    offs = tl.arange(0, BLOCK)
    for i in range(0, n, BLOCK):
        mask = i + offs < n
        tl.store(dst + i + offs, tl.load(src + i + offs, mask=mask), mask=mask)


def word_size(*values: int) -> int:
    """The widest word (8, 4, 2, 1 bytes) dividing every address, offset and length."""
    for word in (8, 4, 2):
        if all(v % word == 0 for v in values):
            return word
    return 1


def migrate_group(
    layers: Sequence[torch.Tensor],
    src: torch.Tensor,
    dst: torch.Tensor,
    run_offsets: Sequence[int],
    run_bytes: int,
) -> None:
    """Copy block ``src[i]`` to ``dst[i]`` in every layer, in one launch.

    ``layers`` share shape, strides and dtype; ``run_offsets`` are the byte offsets
    of the contiguous runs that make up one block, each ``run_bytes`` long.
    """
    first = layers[0]
    elem = first.element_size()
    block_bytes = first.stride(0) * elem
    addrs = [t.data_ptr() for t in layers]
    word = word_size(block_bytes, run_bytes, *run_offsets, *addrs)
    device = first.device
    layer_addr = torch.tensor(addrs, dtype=torch.int64, device=device)
    run_off = torch.tensor([o // word for o in run_offsets], dtype=torch.int64, device=device)
    run_words = run_bytes // word
    grid = (len(layers) * src.numel(), len(run_offsets), triton.cdiv(run_words, TILE))
    _migrate_kernel[grid](
        layer_addr,
        src,
        dst,
        run_off,
        src.numel(),
        block_bytes // word,
        run_words,
        BLOCK=BLOCK,
        TILE=TILE,
        WORD=word,
    )


def memcpy_chunks(copies: Sequence[tuple[int, int, int]], device: torch.device) -> None:
    """Run byte copies ``(src_addr, dst_addr, nbytes)`` (non-overlapping).

    One launch per word width present (at most four), so one odd-sized tensor
    does not drop every other copy to byte-wide accesses.
    """
    by_word: dict[int, list[tuple[int, int, int]]] = {}
    for c in copies:
        if c[2] > 0:
            by_word.setdefault(word_size(*c), []).append(c)
    for word, group in by_word.items():
        tile_bytes = TILE * word
        # Long copies are cut into tiles so one huge tensor (the embedding) spreads
        # over many programs instead of serialising in one.
        chunks = [
            (s + o, d + o, min(tile_bytes, n - o) // word)
            for s, d, n in group
            for o in range(0, n, tile_bytes)
        ]
        table = torch.tensor(chunks, dtype=torch.int64, device=device).t().contiguous()
        _memcpy_kernel[(len(chunks),)](table[0], table[1], table[2], BLOCK=BLOCK, WORD=word)
