"""Where the draft model's weights are, and what moving them costs the KV pool.

The shared :class:`nightjar.core.memory.MemoryController` decides (the engine's
:class:`nightjar.core.driver.StepDriver` advances it); this module carries its decisions
out in simulated time:

- offload: the weights stream to host memory over the host link (overlapping
  compute); the draft is unusable from the start, its KV cache is lost, and the
  pool grows by the draft's blocks only when the copy completes;
- reload: the pool first takes the draft's blocks back, by DRAIN (withhold blocks
  as they free; after ``drain_timeout_s`` preempt the newest requests for the
  rest) or MIGRATE (compact at once, charging the copy of the blocks that sat in
  the reclaimed region to the next step, preempting if even compaction cannot
  fit); then the weights stream back; the first speculative step after it pays the
  draft's KV rebuild like any other switch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Generator
from typing import Any

import simpy

from nightjar.core.memory import Action, DraftState, MemoryController
from nightjar.profile.prefill import reload_cost_s
from nightjar.profile.profile import Profile
from nightjar.sim.knobs import ReloadMode, SimConfig
from nightjar.sim.kv import BlockPool

# A drain that has not finished in this long preempts for the rest: the paper's
# controller reloads when load has dropped, so most drains finish far sooner.
DRAIN_TIMEOUT_S = 2.0


class DraftMemory:
    def __init__(
        self,
        env: simpy.Environment,
        pool: BlockPool,
        profile: Profile,
        config: SimConfig,
    ) -> None:
        self.env = env
        self.pool = pool
        self.profile = profile
        self.mode = config.reload_mode
        facts = profile.memory
        self.draft_blocks = facts.draft_blocks
        self.transfer_s = facts.draft_weight_bytes / facts.host_link_bytes_per_s
        self.block_bytes = facts.block_size * (
            facts.target_kv_bytes_per_token + facts.draft_kv_bytes_per_token
        )
        mem_cfg = dataclasses.replace(config.memory, enabled=config.offload)
        self.controller = MemoryController(mem_cfg, self.draft_blocks, reload_cost_s(profile))
        self._overhead_s = 0.0
        self._drain_started: float | None = None
        self.migrated_blocks = 0
        self.drain_preemptions = 0

    @property
    def resident(self) -> bool:
        return self.controller.draft_resident

    @property
    def state_name(self) -> str:
        return self.controller.state.value

    def start(
        self, action: Action, preempt: Callable[[], bool], on_offload: Callable[[], None]
    ) -> None:
        """Start the transfer the driver's plan names (``Action.NONE``: nothing)."""
        if action is Action.START_OFFLOAD:
            on_offload()
            self.env.process(self._offload())
        elif action is Action.START_RELOAD:
            self._start_reload(preempt)

    def after_step(self, preempt: Callable[[], bool]) -> None:
        """Finish a drain once its blocks are free, preempting when it takes too long."""
        if self._drain_started is None:
            return
        if self.env.now - self._drain_started > DRAIN_TIMEOUT_S:
            while self.pool.reclaim_shortfall() and preempt():
                self.drain_preemptions += 1
        if self.pool.try_finish_reclaim():
            self._drain_started = None
            self.env.process(self._reload_weights())

    def take_step_overhead_s(self) -> float:
        out, self._overhead_s = self._overhead_s, 0.0
        return out

    def summary(self) -> dict[str, float]:
        out = self.controller.summary(self.env.now)
        out["migrated_blocks"] = float(self.migrated_blocks)
        out["drain_preemptions"] = float(self.drain_preemptions)
        return out

    # -- transfers -------------------------------------------------------------------
    def _offload(self) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(self.transfer_s)
        self.pool.grow(self.draft_blocks)
        self.controller.offload_done(self.env.now)

    def _start_reload(self, preempt: Callable[[], bool]) -> None:
        self.pool.start_reclaim(self.draft_blocks)
        if self.mode is ReloadMode.DRAIN:
            self._drain_started = self.env.now
            self.after_step(preempt)
            return
        while self.pool.reclaim_shortfall() and preempt():
            self.drain_preemptions += 1
        # Blocks sit uniformly in the pool, so the reclaimed region holds this
        # share of the used ones; each is read and written once.
        moved = round(self.pool.used * self.draft_blocks / max(self.pool.total, 1))
        self.migrated_blocks += moved
        bandwidth = self.profile.memory.device_bandwidth_bytes_per_s
        self._overhead_s += 2 * moved * self.block_bytes / bandwidth
        self.pool.try_finish_reclaim()
        self.env.process(self._reload_weights())

    def _reload_weights(self) -> Generator[simpy.Event, Any, None]:
        yield self.env.timeout(self.transfer_s)
        self.controller.reload_done(self.env.now)


__all__ = ["DraftMemory", "DraftState"]
