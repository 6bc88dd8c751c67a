"""Whether the KV pool leaves room for requests beside a resident draft's ballast."""

from __future__ import annotations

from nightjar.core.memory import MemoryConfig
from nightjar.errors import NightjarInputError

# 16 TiB: past any one machine's memory; inf or 1e300 would fail deep in vLLM (int()).
MAX_KV_CACHE_GB = 16384.0


def check_kv_cache_gb(kv_cache_gb: float | None) -> None:
    """The one check of ``--kv-cache-gb`` (live, bench live, profile): a finite size."""
    if kv_cache_gb is not None and not 0 < kv_cache_gb <= MAX_KV_CACHE_GB:
        raise NightjarInputError(
            f"--kv-cache-gb must be in (0, {MAX_KV_CACHE_GB:g}] GiB, got {kv_cache_gb}")


def check_kv_room(kv_cache_gb: float | None, draft: str | None, memory: MemoryConfig | None,
                  ballast_blocks: int | None = None, tensor_parallel_size: int = 1) -> None:
    """Refuse, before vLLM starts, a KV pool the draft's ballast would fill entirely.

    With ``--offload on`` the resident draft withholds as many KV blocks as its weight
    bytes (docs/live.md); when those bytes reach the whole ``--kv-cache-gb`` no block is
    left for requests. Exact block counts need vLLM's block size, so a pool that is
    only nearly full is still caught by the scheduler at start-up (one line, exit 2).
    ``draft`` None: no draft speculates, nothing is withheld.
    """
    check_kv_cache_gb(kv_cache_gb)
    if draft is None or memory is None or kv_cache_gb is None:
        return
    if ballast_blocks is not None:
        return  # counted in blocks: the scheduler checks it against the pool
    from nightjar.live.residency.coordinator import draft_weight_bytes

    # Per rank: --kv-cache-gb is one rank's pool, and each rank holds 1/TP of the draft.
    draft_bytes = draft_weight_bytes(draft) / tensor_parallel_size
    pool_bytes = kv_cache_gb * 2**30
    if draft_bytes >= pool_bytes:
        raise NightjarInputError(
            f"the draft's {draft_bytes / 2**20:.1f} MiB of weights, withheld from the KV "
            f"pool while it is resident (--offload on), fill the whole pool of "
            f"{pool_bytes / 2**20:.1f} MiB (--kv-cache-gb {kv_cache_gb}): give a larger "
            "--kv-cache-gb or --offload off"
        )
