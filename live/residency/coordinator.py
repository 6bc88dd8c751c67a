"""Draft residency on the scheduler side: the memory controller plus the KV ballast.

One object per scheduler. Each step :meth:`Residency.before_step` advances the
controller (or a forced test schedule), empties the ballast region during a reload
(drain, or migrate: see :mod:`nightjar.live.residency.ballast`) and returns the command for
the worker (``"offload"``, ``"reload"`` or ``None``); a migration's block copies
are left in :attr:`Residency.pairs` for the same step's ``SchedulerOutput``;
:meth:`Residency.after_step` is called once the worker has executed that step,
which on CPU means the transfer is complete (the worker moves weights
synchronously before the forward pass).

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

from nightjar.live.kernels.plan import Pair
from nightjar.live.residency.ballast import Ballast
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import StepLog
from nightjar.memory import Action, DraftState, MemoryConfig, MemoryController
from nightjar.types import StepContext


def draft_weight_bytes(model_path: str) -> int:
    """Bytes of the draft's weight files; 0 where the path is not a local directory."""
    root = Path(model_path)
    if not root.is_dir():
        return 0
    return sum(p.stat().st_size for p in root.glob("*.safetensors")) or sum(
        p.stat().st_size for p in root.glob("*.bin")
    )


def kv_bytes_per_block(kv_cache_config: Any) -> int:
    total = int(sum(t.size for t in kv_cache_config.kv_cache_tensors))
    return max(1, total // max(1, int(kv_cache_config.num_blocks)))


class Residency:
    def __init__(
        self, settings: LiveSettings, kv_cache_manager: Any, draft_blocks: int, log: StepLog
    ) -> None:
        self.enabled = settings.memory is not None or bool(settings.forced_residency)
        self.controller = MemoryController(
            MemoryConfig(**(settings.memory or {"enabled": False})), draft_blocks
        )
        self.forced = dict(settings.forced_residency)
        self._kv = kv_cache_manager
        self.migrate = settings.reload == "migrate"
        self.ballast = Ballast(kv_cache_manager.block_pool, draft_blocks if self.enabled else 0)
        self.ballast.fill()
        # Block copies for the worker, set by the step that migrated (else empty).
        self.pairs: list[Pair] = []
        self._log = log
        self._in_flight: str | None = None  # command sent to the worker this step
        self.step_index = 0

    @property
    def state(self) -> DraftState:
        return self.controller.state

    @property
    def resident(self) -> bool:
        return self.controller.draft_resident

    def before_step(self, ctx: StepContext, decision: int) -> str | None:
        """Advance residency for the step about to be scheduled; returns the worker command."""
        self.step_index += 1
        self.pairs = []
        if not self.enabled:
            return None
        forced = self.forced.pop(self.step_index, None)
        ctrl = self.controller
        if forced == "offload" and ctrl.force(Action.START_OFFLOAD, ctx.now):
            return self._send("offload", ctx.now)
        if forced == "reload":
            ctrl.force(Action.START_RELOAD, ctx.now)
        elif forced is None and self.controller.config.enabled:
            action = ctrl.step(ctx, decision)
            if action is Action.START_OFFLOAD:
                return self._send("offload", ctx.now)
        if ctrl.state is DraftState.RELOADING and self._in_flight is None:
            self.ballast.fill()
            if not self.ballast.full and self.migrate:
                self.pairs = self.ballast.compact(self._block_lists())
                if self.pairs:
                    self._log.write(
                        "event", event="migrate", mono=ctx.now, pairs=[list(p) for p in self.pairs]
                    )
            if self.ballast.full:
                return self._send("reload", ctx.now)
        return None

    def _block_lists(self) -> list[list[Any]]:
        """Every request's block list in every KV-cache group that uses the ballast's pool."""
        pool = self._kv.block_pool
        return [
            blocks
            for manager in self._kv.coordinator.single_type_managers
            if manager.block_pool is pool
            for blocks in manager.req_to_blocks.values()
        ]

    def _send(self, command: str, now: float) -> str:
        self._in_flight = command
        self._log.write(
            "event",
            event=f"{command}_start",
            mono=now,
            ballast=self.ballast.held,
            migrated=len(self.pairs),
        )
        return command

    def after_step(self) -> str | None:
        """The worker has executed the step that carried the last command (returned)."""
        command, self._in_flight = self._in_flight, None
        if command is None:
            return None
        now = time.monotonic()
        if command == "offload":
            released = self.ballast.release()
            self.controller.offload_done(now)
        else:
            released = 0
            self.controller.reload_done(now)
        self._log.write("event", event=f"{command}_done", mono=now, released=released)
        self._log.write("summary", **self.controller.summary(now))
        return command
