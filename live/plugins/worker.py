"""A ``worker_cls`` that can take the drafter out of device memory and skip it.

The Nightjar scheduler attaches one typed message
(:class:`nightjar.live.plugins.message.WorkerMessage`: a residency action and KV block
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
docs/live.md.
"""

from __future__ import annotations

import time
from typing import Any, cast

import torch
from vllm.logger import init_logger

from nightjar.live.kernels.ops import migrate_blocks
from nightjar.live.kernels.plan import Pair, remap_block_ids, remap_block_table
from nightjar.live.plugins.message import message_of
from nightjar.live.residency.parking import WeightParking
from nightjar.live.settings import LiveSettings
from nightjar.memory import Action

log = init_logger(__name__)


def _base_worker() -> type:
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        from vllm.v1.worker.cpu_worker import CPUWorker

        return cast(type, CPUWorker)
    from vllm.v1.worker.gpu_worker import Worker

    return cast(type, Worker)


class NightjarWorkerMixin:
    _nj_parking: WeightParking | None = None
    _nj_real_propose: Any = None
    _nj_skip_now = False  # skip the draft forward in the current step
    _nj_skip_at_zero = False  # settings.draft_kv == "skip"
    # Counters for tests and logs: draft passes run, and steps where one was skipped.
    _nj_draft_runs = 0
    _nj_draft_skips = 0
    _nj_migrated = 0  # KV blocks copied by reload migrations

    def _nj_drafter(self) -> Any:
        runner: Any = getattr(self, "model_runner", None)
        return getattr(runner, "drafter", None)

    def _nj_propose(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        if not (self._nj_skip_now or self.nightjar_draft_parked()):
            self._nj_draft_runs += 1
            drafts: torch.Tensor = self._nj_real_propose(*args, **kwargs)
            return drafts
        self._nj_draft_skips += 1
        # Mirrors the K = 0 path of vLLM's proposer, minus the draft forward pass.
        cad = kwargs["common_attn_metadata"]
        device = kwargs["next_token_ids"].device
        return torch.empty(cad.batch_size(), 0, device=device, dtype=torch.int64)

    def nightjar_offload(self) -> int:
        drafter = self._nj_drafter()
        if drafter is None or getattr(drafter, "model", None) is None:
            raise RuntimeError("nightjar: offload asked but the engine has no draft model")
        if self._nj_parking is None:
            self._nj_parking = WeightParking(drafter.model)
        return int(self._nj_parking.park())

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
        }

    def nightjar_draft_parked(self) -> bool:
        return self._nj_parking is not None and self._nj_parking.parked

    def _nj_install(self) -> None:
        """Route the drafter's ``propose`` through Nightjar once the model is loaded."""
        drafter = self._nj_drafter()
        if drafter is None or self._nj_real_propose is not None:
            return
        self._nj_real_propose = drafter.propose
        drafter.propose = self._nj_propose
        vllm_config: Any = getattr(self, "vllm_config", None)
        settings = LiveSettings.from_config(getattr(vllm_config, "additional_config", None))
        self._nj_skip_at_zero = settings.draft_kv == "skip"

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
            start = time.perf_counter()
            offload = message.residency is Action.START_OFFLOAD
            moved = self.nightjar_offload() if offload else self.nightjar_reload()
            log.info(
                "nightjar: %s moved %.1f MB in %.3f s",
                "offload" if offload else "reload",
                moved / 1e6,
                time.perf_counter() - start,
            )
        return super().execute_model(scheduler_output, *args, **kwargs)  # type: ignore[misc]


NightjarWorker: type = type("NightjarWorker", (NightjarWorkerMixin, _base_worker()), {})
NightjarWorker.__module__ = __name__
NightjarWorker.__doc__ = "vLLM's platform worker with Nightjar's draft residency."
