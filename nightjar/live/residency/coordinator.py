"""Draft residency on the scheduler side: carrying out the driver's memory actions.

The step driver (:class:`nightjar.core.driver.StepDriver`) advances the memory controller;
one :class:`Residency` per scheduler carries out what it decided in vLLM's terms.
Each step :meth:`Residency.next_step` names a forced test action, if the settings
schedule one for this step; :meth:`Residency.carry_out` takes the plan's action,
empties the ballast region during a reload (drain, or migrate: see
:mod:`nightjar.live.residency.ballast`) and returns the step's
:class:`~nightjar.live.wire.WorkerMessage`; :meth:`Residency.after_step`
is called once the worker has executed that step, which on CPU means the transfer is
complete (the worker moves weights synchronously before the forward pass).

Sequencing invariants:
- the ballast is full (its blocks withheld) whenever the draft is resident;
- an offload releases the ballast only after the worker reports the weights gone;
- a reload is sent to the worker only after the ballast is full again (drain or
  migrate), so the KV pool never counts the draft's bytes twice;
- migration pairs are only ever sent together with that step's reload: the worker
  copies the blocks and remaps its block tables before the step's forward pass,
  and the scheduler has already rewritten its own books, so both sides agree from
  that step on.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from nightjar.core.drafter import drafter_kind
from nightjar.core.memory import Action, DraftState, MemoryConfig, MemoryController
from nightjar.live.kernels.compaction import Pair
from nightjar.live.residency.ballast import Ballast
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import StepLog
from nightjar.live.wire import IDLE, WorkerMessage

_FORCED = {"offload": Action.START_OFFLOAD, "reload": Action.START_RELOAD}
_NAMES = {Action.START_OFFLOAD: "offload", Action.START_RELOAD: "reload"}


def memory_controller(settings: LiveSettings, draft_blocks: int) -> MemoryController:
    """The controller the settings describe; disabled when ``settings.memory`` is None."""
    config = settings.memory if settings.memory is not None else MemoryConfig(enabled=False)
    return MemoryController(config, draft_blocks, settings.reload_cost_s)


def draft_weight_bytes(model_path: str) -> int:
    """Bytes of the draft's weight files; 0 where the path is not a local directory."""
    root = Path(model_path)
    if not root.is_dir():
        return 0
    return sum(p.stat().st_size for p in root.glob("*.safetensors")) or sum(
        p.stat().st_size for p in root.glob("*.bin")
    )


def ballast_blocks(settings: LiveSettings, vllm_config: Any, kv_cache_config: Any) -> int:
    """KV blocks the draft stands for, per rank; the scheduler and every worker agree.

    ``settings.ballast_blocks`` when given; else the draft's weight-file bytes over
    the tensor-parallel ranks (its linears and embeddings are sharded; the few
    replicated norms are ignored), over one rank's bytes per block. With
    ``settings.alias`` the blocks its parameters' layout needs (:func:`_alias_ballast`).
    """
    if settings.alias:
        return _alias_ballast(settings, vllm_config, kv_cache_config)
    if settings.ballast_blocks is not None:
        return int(settings.ballast_blocks)
    spec = vllm_config.speculative_config
    if spec is None or spec.draft_model_config is None:
        return 0
    if not drafter_kind(str(spec.method), "speculative method").own_weights:
        return 0  # MTP: the target's own layers, nothing Nightjar moves out
    per_block = kv_bytes_per_block(kv_cache_config)
    ranks = int(vllm_config.parallel_config.tensor_parallel_size)
    per_rank = -(-draft_weight_bytes(spec.draft_model_config.model) // ranks)
    return int(-(-per_rank // per_block))


def _alias_ballast(settings: LiveSettings, vllm_config: Any, kv_cache_config: Any) -> int:
    """The aliased draft's region, from its files' shapes and the KV layout.

    A ``--ballast-blocks`` below that is refused with the number to give (raised in
    the scheduler's constructor, so the user gets one line and exit 2 before any
    worker tries to place the weights); a larger one is kept.
    """
    from nightjar.live.residency.alias_size import alias_ballast_blocks

    needed = alias_ballast_blocks(vllm_config, kv_cache_config)
    given = settings.ballast_blocks
    if given is None:
        return int(needed)
    if given < needed:
        raise ValueError(
            f"nightjar: --alias-draft needs a ballast of at least {needed} KV blocks "
            f"for the draft's weights, got --ballast-blocks {given}: give "
            f"--ballast-blocks {needed} or leave it out (sized automatically)"
        )
    return int(given)


def kv_bytes_per_block(kv_cache_config: Any) -> int:
    total = int(sum(t.size for t in kv_cache_config.kv_cache_tensors))
    return max(1, total // max(1, int(kv_cache_config.num_blocks)))


class Residency:
    def __init__(
        self,
        settings: LiveSettings,
        controller: MemoryController,
        kv_cache_manager: Any,
        log: StepLog,
    ) -> None:
        self.enabled = (
            settings.memory is not None
            or bool(settings.forced_residency)
            or bool(settings.forced_residency_ms)
        )
        self.controller = controller
        self.forced = dict(settings.forced_residency)
        self.forced_ms = dict(settings.forced_residency_ms)
        self._first_step: float | None = None
        self._kv = kv_cache_manager
        self.migrate = settings.reload == "migrate"
        blocks = controller.draft_blocks if self.enabled else 0
        self.ballast = Ballast(kv_cache_manager.block_pool, blocks)
        self.ballast.fill()
        self._log = log
        self._in_flight = Action.NONE  # transfer sent to the worker this step
        self.step_index = 0

    @property
    def state(self) -> DraftState:
        return self.controller.state

    def next_step(self) -> Action:
        """Count the step about to be scheduled; the forced test action for it, if any."""
        self.step_index += 1
        by_step = self.forced.pop(self.step_index, "")
        if by_step or not self.forced_ms:
            return _FORCED.get(by_step, Action.NONE)
        now = time.monotonic()
        if self._first_step is None:
            self._first_step = now
        due = min(self.forced_ms)
        if (now - self._first_step) * 1000.0 < due:
            return Action.NONE
        return _FORCED[self.forced_ms.pop(due)]

    def carry_out(self, action: Action, now: float) -> WorkerMessage:
        """Carry out the plan's action for this step; returns the worker's message."""
        if not self.enabled:
            return IDLE
        if action is Action.START_OFFLOAD:
            return self._send(Action.START_OFFLOAD, now, ())
        if self.controller.state is DraftState.RELOADING and self._in_flight is Action.NONE:
            self.ballast.fill()
            pairs: list[Pair] = []
            if not self.ballast.full and self.migrate:
                pairs = self.ballast.compact(self._block_lists())
                if pairs:
                    self._log.write(
                        "event", event="migrate", mono=now, pairs=[list(p) for p in pairs]
                    )
            if self.ballast.full:
                return self._send(Action.START_RELOAD, now, tuple(pairs))
        return IDLE

    def _block_lists(self) -> list[list[Any]]:
        """Every request's block list in every KV-cache group that uses the ballast's pool."""
        pool = self._kv.block_pool
        return [
            blocks
            for manager in self._kv.coordinator.single_type_managers
            if manager.block_pool is pool
            for blocks in manager.req_to_blocks.values()
        ]

    def _send(self, action: Action, now: float, pairs: tuple[Pair, ...]) -> WorkerMessage:
        self._in_flight = action
        self._log.write(
            "event",
            event=f"{_NAMES[action]}_start",
            mono=now,
            ballast=self.ballast.held,
            migrated=len(pairs),
        )
        return WorkerMessage(residency=action, migration=pairs)

    def after_step(self) -> str | None:
        """The worker has executed the step that carried the last transfer (its name)."""
        action, self._in_flight = self._in_flight, Action.NONE
        if action is Action.NONE:
            return None
        now = time.monotonic()
        if action is Action.START_OFFLOAD:
            released = self.ballast.release()
            self.controller.offload_done(now)
        else:
            released = 0
            self.controller.reload_done(now)
        command = _NAMES[action]
        self._log.write("event", event=f"{command}_done", mono=now, released=released)
        self._log.write("summary", **self.controller.summary(now))
        return command
