"""A ``worker_cls`` that can take the drafter out of device memory and skip it.

The Nightjar scheduler attaches one typed message
(:class:`nightjar.live.wire.WorkerMessage`: a residency action and KV block
migration pairs) to the ``SchedulerOutput`` of each step. The worker performs
the move before that step's forward pass, so when the scheduler sees the step's
output the transfer is complete. While the drafter is parked, its ``propose`` is
replaced by one that returns no draft tokens without running the draft model
(gamma is 0 on those steps anyway; the scheduler clamps it). The draft's KV cache
is therefore not kept in sync while parked: after a reload the drafter sees stale
KV for the tokens it missed, which costs acceptance, never correctness (the
target verifies every token). A reload that migrated the ballast region also
carries ``(src, dst)`` block copies: the worker copies those KV blocks in every
layer (target and draft) and rewrites its persistent block tables before the
reload and the forward pass, so the step already reads the moved blocks. See
docs/live-internals.md.
"""

from __future__ import annotations

import gc
import os
import time
from typing import Any, cast

import torch
from vllm.logger import init_logger

from nightjar.core.drafter import DRAFT_MODEL, DRAFTERS, DrafterKind, drafter_kind
from nightjar.core.memory import Action
from nightjar.errors import NightjarInputError
from nightjar.live.kernels.compaction import Pair, remap_block_ids, remap_block_table
from nightjar.live.kernels.ops import migrate_blocks
from nightjar.live.residency.alias import (
    AliasedParking,
    blocks_needed,
    chunked_owners,
    plain_linears,
    splittable_rows,
)
from nightjar.live.residency.coordinator import ballast_blocks
from nightjar.live.residency.parking import WeightParking
from nightjar.live.settings import LiveSettings
from nightjar.live.vllm_family import running_family
from nightjar.live.wire import message_of

log = init_logger(__name__)

# Test-only fault injection: a comma-separated list of KIND[:N] (KIND "offload" or
# "reload", N default 1): the worker's N-th transfer of that kind raises before it
# moves anything, as a failed copy would. Read once per worker; never set it in
# production.
FAULT_ENV = "NIGHTJAR_TEST_FAULT"


def _rss_bytes() -> int:
    """This process's resident memory (Linux /proc), for the aliasing memory tests.

    Freed memory is first handed back to the OS (glibc ``malloc_trim``), so the
    number counts live allocations rather than what the allocator kept cached.
    """
    import ctypes
    import ctypes.util

    gc.collect()
    libc = ctypes.util.find_library("c")
    if libc:
        ctypes.CDLL(libc).malloc_trim(0)
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class InjectedFault(RuntimeError):
    """Raised by the test-only fault hook (:data:`FAULT_ENV`)."""


def _base_worker() -> type:
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        from vllm.v1.worker.cpu_worker import CPUWorker

        return cast(type, CPUWorker)
    from vllm.v1.worker.gpu_worker import Worker

    return cast(type, Worker)


class NightjarWorkerMixin:
    _nj_kind: DrafterKind = DRAFTERS[DRAFT_MODEL]
    _nj_spec_tokens = 0  # the engine's num_speculative_tokens
    _nj_parking: WeightParking | AliasedParking | None = None
    _nj_real_propose: Any = None
    _nj_skip_now = False  # skip the draft forward in the current step
    _nj_skip_at_zero = False  # settings.draft_kv == "skip"
    # Counters for tests and logs: draft passes run, and steps where one was skipped.
    _nj_draft_runs = 0
    _nj_draft_skips = 0
    _nj_migrated = 0  # KV blocks copied by reload migrations
    _nj_faults: set[tuple[str, int]] | None = None  # test-only: (kind, n-th) to fail
    _nj_transfers: dict[str, int] | None = None  # transfers started, per kind
    _nj_failed: frozenset[str] = frozenset()  # kinds whose failure was logged already
    _nj_reload_pending = False  # a reload failed: retry it before each step

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # vLLM builds the worker itself, also on the drop-in path with none of
        # Nightjar's environment: refuse here, before anything loads, rather than
        # wrap a drafter the release no longer has.
        family = running_family()
        if not family.worker:
            raise NightjarInputError(
                f"nightjar: Nightjar's worker does not run on vLLM "
                f"{', '.join(family.releases)} yet (its V2 runner has no V1 drafter to "
                "wrap): start vLLM without --worker-cls; the scheduler alone adapts K"
            )
        config = kwargs.get("vllm_config")
        if config is not None:
            # The drop-in settings, checked before the model loads (the scheduler,
            # which uses them, is built only after it).
            spec = config.speculative_config
            LiveSettings.for_engine(
                config.additional_config, int(spec.num_speculative_tokens) if spec else 0
            )
        super().__init__(*args, **kwargs)

    def _nj_drafter(self) -> Any:
        runner: Any = getattr(self, "model_runner", None)
        return getattr(runner, "drafter", None)

    def _nj_propose(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """A model drafter's ``propose`` (draft model, EAGLE, MTP; keyword call)."""
        if not (self._nj_skip_now or self.nightjar_draft_parked()):
            self._nj_draft_runs += 1
            drafts: torch.Tensor = self._nj_real_propose(*args, **kwargs)
            return drafts
        self._nj_draft_skips += 1
        # Mirrors the K = 0 path of vLLM's proposer, minus the draft forward pass.
        cad = kwargs["common_attn_metadata"]
        device = kwargs["next_token_ids"].device
        return torch.empty(cad.batch_size(), 0, device=device, dtype=torch.int64)

    def _nj_propose_ngram(self, k: int, sampled: list[list[int]], *args: Any,
                          **kwargs: Any) -> list[list[int]]:
        """The n-gram lookup's ``propose(K, sampled, ...)``: at K = 0 there is nothing to
        look up and no state to keep, so it is not run at all."""
        if k == 0:
            self._nj_draft_skips += 1
            return [[] for _ in sampled]
        self._nj_draft_runs += 1
        drafts: list[list[int]] = self._nj_real_propose(k, sampled, *args, **kwargs)
        return drafts

    def _nj_propose_suffix(self, k: int, batch: Any, sampled: list[list[int]], *args: Any,
                           **kwargs: Any) -> list[list[int]]:
        """The suffix drafter's ``propose``: vLLM 0.32's asserts K == its configured
        length, so it runs at that length and each proposal is cut to the step's K.

        It always runs: its suffix trees take in every new token (K = 0 included),
        which keeps later proposals as good as without Nightjar.
        """
        self._nj_draft_runs += 1
        drafts: list[list[int]] = self._nj_real_propose(
            self._nj_spec_tokens, batch, sampled, *args, **kwargs
        )
        return [d[:k] for d in drafts]

    def nightjar_offload(self) -> int:
        drafter = self._nj_drafter()
        if drafter is None or getattr(drafter, "model", None) is None:
            raise RuntimeError("nightjar: offload asked but the engine has no draft model")
        if not self._nj_kind.own_weights:
            raise RuntimeError(f"nightjar: the {self._nj_kind.name} drafter has no weights "
                               "of its own to offload")
        if self._nj_parking is None:
            self._nj_parking = WeightParking(drafter.model, shared=self._nj_target_params())
        return int(self._nj_parking.park())

    def _nj_target_params(self) -> set[int]:
        """Ids of the target's parameters: an EAGLE head shares the target's embedding
        (and, for EAGLE, its LM head), which must stay where the target reads them."""
        runner: Any = getattr(self, "model_runner", None)
        model = runner.get_model() if runner is not None else None
        return {id(p) for p in model.parameters()} if model is not None else set()

    def nightjar_reload(self) -> int:
        drafter = self._nj_drafter()
        if self._nj_parking is None or drafter is None:
            return 0
        return int(self._nj_parking.restore())

    def nightjar_migrate(self, pairs: list[Pair]) -> None:
        """Copy KV blocks ``src -> dst`` and point every block table at the copies."""
        from vllm.v1.kv_cache_interface import group_kernel_blocks

        runner: Any = getattr(self, "model_runner", None)
        num_blocks = int(runner.kv_cache_config.num_blocks)
        # With kernel-block splitting a layer's dim 0 counts kernel blocks; the
        # scheduler's ids are manager blocks.
        caches = [group_kernel_blocks(c, num_blocks) for c in runner.kv_caches]
        migrate_blocks(caches, pairs)
        # The region now belongs to the draft (the real design packs its weights
        # there): clear the sources, so a stale reference to one reads zeros, not
        # the right KV by luck.
        src = [s for s, _ in pairs]
        for cache in caches:
            cache.index_fill_(0, torch.tensor(src, dtype=torch.int64, device=cache.device), 0)
        # The CPU side of each table is the source of truth (copied to the device
        # for the running rows every step); rows not in the batch are rebuilt from
        # the request states below when they are scheduled again.
        for table in runner.input_batch.block_table.block_tables:
            cpu = table.block_table.cpu
            cpu.copy_(remap_block_table(cpu, pairs))
        for state in runner.requests.values():
            for ids in state.block_ids:
                ids[:] = remap_block_ids(ids, pairs)
        self._nj_migrated += len(pairs)

    def nightjar_draft_counts(self) -> dict[str, int]:
        """Draft passes run and skipped so far (``LLM.collective_rpc`` reads this)."""
        return {
            "runs": self._nj_draft_runs,
            "skips": self._nj_draft_skips,
            "migrated": self._nj_migrated,
            "failed": len(self._nj_failed),
        }

    def nightjar_alias_report(self) -> dict[str, Any]:
        """Whether the drafter's weights live inside the KV region, and its bytes."""
        parking = self._nj_parking
        if not isinstance(parking, AliasedParking):
            return {"aliased": False}
        return {
            "aliased": True,
            "parked": parking.parked,
            "inside": parking.parked or parking.inside_region(),
            "region_blocks": len(parking.region),
            "block_bytes": parking.block_bytes,
            "split": parking.split_names,
            "bytes": parking.resident_bytes,
            "rss_bytes": _rss_bytes(),
        }

    def nightjar_rss_bytes(self) -> int:
        return _rss_bytes()

    def _nj_alias(self, settings: LiveSettings) -> None:
        """Place the drafter's weights in the ballast region (``settings.alias``)."""
        from vllm.platforms import current_platform
        from vllm.v1.kv_cache_interface import group_kernel_blocks

        drafter = self._nj_drafter()
        runner: Any = getattr(self, "model_runner", None)
        vllm_config: Any = getattr(self, "vllm_config", None)
        config = runner.kv_cache_config
        num_blocks = int(config.num_blocks)
        blocks = ballast_blocks(settings, vllm_config, config)
        caches = [group_kernel_blocks(c, num_blocks) for c in runner.kv_caches]
        if current_platform.is_cpu():
            plain_linears(drafter.model)
        # The loaded (fused) parameters, split where AliasedParking may split them.
        owners = chunked_owners(drafter.model)
        params = list(drafter.model.parameters())
        sizes = [p.numel() * p.element_size() for p in params]
        rows = [splittable_rows(p) if id(p) in owners else 0 for p in params]
        per_layer = [c[0].numel() * c.element_size() for c in caches]
        needed = blocks_needed(sizes, per_layer, 64, rows)
        if needed > blocks:
            raise ValueError(
                f"nightjar: aliasing the draft needs a ballast of {needed} KV blocks, "
                f"the engine withholds {blocks}: give --ballast-blocks {needed}"
            )
        self._nj_parking = AliasedParking(
            drafter.model, caches, range(num_blocks - blocks, num_blocks)
        )
        gc.collect()  # the original weights and the prepacked handles go now
        log.info("nightjar: draft weights aliased into %d ballast blocks", blocks)

    def nightjar_draft_parked(self) -> bool:
        return self._nj_parking is not None and self._nj_parking.parked

    def _nj_install(self) -> None:
        """Route the drafter's ``propose`` through Nightjar once the model is loaded.

        The wrapper follows the method's calling convention (vLLM's model runner calls
        the lookups positionally and the model drafters by keyword)."""
        drafter = self._nj_drafter()
        if drafter is None or self._nj_real_propose is not None:
            return
        vllm_config: Any = getattr(self, "vllm_config", None)
        spec = vllm_config.speculative_config
        self._nj_kind = drafter_kind(str(spec.method), "speculative method")
        self._nj_spec_tokens = int(spec.num_speculative_tokens)
        self._nj_real_propose = drafter.propose
        wrappers = {"ngram": self._nj_propose_ngram, "suffix": self._nj_propose_suffix}
        drafter.propose = wrappers.get(self._nj_kind.name, self._nj_propose)
        settings = LiveSettings.for_engine(
            getattr(vllm_config, "additional_config", None), self._nj_spec_tokens
        )
        self._nj_skip_at_zero = settings.draft_kv == "skip"
        if settings.alias:
            self._nj_alias(settings)

    def execute_model(self, scheduler_output: Any, *args: Any, **kwargs: Any) -> Any:
        self._nj_install()
        self._nj_skip_now = self._nj_skip_at_zero and (
            scheduler_output.num_spec_tokens_to_schedule == 0
        )
        message = message_of(scheduler_output)
        if message.migration:
            # Before the reload and the forward pass: both may touch the region.
            start = time.perf_counter()
            self.nightjar_migrate(list(message.migration))
            log.info(
                "nightjar: migrated %d KV blocks in %.3f s",
                len(message.migration),
                time.perf_counter() - start,
            )
        if message.residency is not Action.NONE:
            offload = message.residency is Action.START_OFFLOAD
            # A newer command replaces a reload still being retried.
            self._nj_reload_pending = False
            self._nj_transfer("offload" if offload else "reload")
        elif self._nj_reload_pending:
            self._nj_transfer("reload")
        return super().execute_model(scheduler_output, *args, **kwargs)  # type: ignore[misc]

    def _nj_transfer(self, kind: str) -> None:
        """Offload or reload the drafter; a failure is logged once and never stops serving.

        A failed offload leaves the drafter resident (usable; the scheduler keeps
        gamma at 0 while it believes the draft is away). A failed reload leaves it
        parked: its ``propose`` returns no drafts, so nothing is speculated, and the
        reload is retried before every later step until it succeeds.
        """
        start = time.perf_counter()
        try:
            self._nj_inject(kind)
            moved = self.nightjar_offload() if kind == "offload" else self.nightjar_reload()
        except Exception:
            self._nj_reload_pending = kind == "reload"
            if kind not in self._nj_failed:
                self._nj_failed = self._nj_failed | {kind}
                log.exception(
                    "nightjar: draft %s failed; serving continues %s",
                    kind,
                    "with the draft resident" if kind == "offload" else "without speculation",
                )
            return
        self._nj_reload_pending = False
        log.info(
            "nightjar: %s moved %.1f MB in %.3f s", kind, moved / 1e6, time.perf_counter() - start
        )

    def _nj_inject(self, kind: str) -> None:
        if self._nj_faults is None:
            faults = set()
            for item in os.environ.get(FAULT_ENV, "").split(","):
                name, _, nth = item.strip().partition(":")
                if name:
                    faults.add((name, int(nth or 1)))
            self._nj_faults = faults
        if self._nj_transfers is None:
            self._nj_transfers = {}
        n = self._nj_transfers[kind] = self._nj_transfers.get(kind, 0) + 1
        if (kind, n) in self._nj_faults:
            raise InjectedFault(f"nightjar: injected fault in {kind} #{n} ({FAULT_ENV})")


NightjarWorker: type = type("NightjarWorker", (NightjarWorkerMixin, _base_worker()), {})
NightjarWorker.__module__ = __name__
NightjarWorker.__doc__ = "vLLM's platform worker with Nightjar's draft residency."
