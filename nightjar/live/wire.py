"""The one message the Nightjar scheduler sends its workers with each step.

vLLM hands the worker only the step's ``SchedulerOutput``, so the scheduler attaches
one :class:`WorkerMessage` to it as a single attribute (:data:`ATTR`) and the worker
reads it back with :func:`message_of`. The message is frozen and made of plain
values, so it pickles unchanged when the worker runs in another process.
Imports neither vllm nor torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nightjar.core.memory import Action

ATTR = "nightjar"  # the SchedulerOutput attribute that carries the message

Pair = tuple[int, int]


@dataclass(frozen=True, slots=True)
class WorkerMessage:
    """What the worker must do before the step's forward pass, in this order.

    ``migration``: ``(src, dst)`` KV block copies (a reload that compacted the ballast
    region; see :mod:`nightjar.live.kernels.compaction`), then ``residency``: move the
    draft's weights out (``START_OFFLOAD``) or back (``START_RELOAD``). Invariant:
    migration pairs only travel with a reload.
    """

    residency: Action = Action.NONE
    migration: tuple[Pair, ...] = ()

    def __post_init__(self) -> None:
        if self.migration and self.residency is not Action.START_RELOAD:
            raise ValueError("nightjar: KV block migration travels only with a reload")

    @property
    def empty(self) -> bool:
        return self.residency is Action.NONE and not self.migration


IDLE = WorkerMessage()


def attach(scheduler_output: Any, message: WorkerMessage) -> None:
    setattr(scheduler_output, ATTR, message)


def message_of(scheduler_output: Any) -> WorkerMessage:
    """The step's message; :data:`IDLE` for a step scheduled without Nightjar."""
    message = getattr(scheduler_output, ATTR, None)
    return message if isinstance(message, WorkerMessage) else IDLE
