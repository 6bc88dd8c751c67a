"""The draft memory of a server that loads no draft: what ``nospec`` really runs on.

A policy that can never speculate (:func:`nightjar.policies.registry.spec_needs_draft`) is
served the way a real deployment would serve it: no draft weights, no draft KV
cache, the whole pool for the target (``MemoryFacts.kv_blocks(False)``), nothing to
offload. Same interface as :class:`nightjar.sim.draft.DraftMemory`.
"""

from __future__ import annotations

from collections.abc import Callable

from nightjar.core.memory import Action, DraftState, MemoryConfig, MemoryController

# The per-step CSV's ``draft_state`` for a run without a draft.
ABSENT = "absent"


class NoDraft:
    def __init__(self, now: Callable[[], float]) -> None:
        self.resident = False
        self.state_name = ABSENT
        self._now = now
        # The step driver needs a controller; this one is off and owns no blocks, so
        # it never starts a transfer (the policy never asks to speculate anyway).
        self.controller = MemoryController(MemoryConfig(enabled=False), 0)

    def start(
        self, action: Action, preempt: Callable[[], bool], on_offload: Callable[[], None]
    ) -> None:
        pass

    def after_step(self, preempt: Callable[[], bool]) -> None:
        pass

    def take_step_overhead_s(self) -> float:
        return 0.0

    def summary(self) -> dict[str, float]:
        out = {"offloads": 0.0, "reloads": 0.0, "gain_reloads": 0.0, "regretted_reloads": 0.0}
        for state in DraftState:
            out[f"time_{state.value}_s"] = 0.0
        out["time_absent_s"] = self._now()
        out["migrated_blocks"] = 0.0
        out["drain_preemptions"] = 0.0
        return out
