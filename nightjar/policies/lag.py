"""Step times of an engine that drafts one step ahead, attributed to one gamma.

In vLLM V1 the K chosen at step t is drafted at the end of t and verified in t+1
(:mod:`nightjar.live.plugins.stepstats`), so a step's wall time is
``verify(K_prev) + draft(K_now)``. Where the two K agree that is the steady-state
step of the gamma, which is what the step model, the simulator and the tables price.
At a switch it is neither: the gamma-0 step that drafts for a speculating step next
carries the draft's forward passes, and the speculating step that drafts nothing
next hides them. Learned as they come, they make every one-step probe of gamma 0
price gamma 0 dearer and speculation cheaper, the one bias that keeps a policy
speculating under load (measured on the tiny pair at B = 64: gamma-0 steps of 84-86
ms against 67-75 ms when steady).

A switch undone at once (a -> b -> a) spans two steps whose times add up to
``T(a) + T(b)``; with the model's ``T(a)`` that prices ``b``. Any other switch step is
dropped: one sample per lasting switch is all that is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _Switch:
    verified: int
    drafting: int
    batch_size: int
    step_s: float


class LagAttribution:
    """Turns lagged steps into steady-state samples ``(gamma, seconds)``.

    Invariant: ``_held`` is the previous step when it was a pure-decode switch step
    not yet paired, else None.
    """

    def __init__(self) -> None:
        self._held: _Switch | None = None

    def forget(self) -> None:
        """A step that teaches nothing (clamped, empty) came between: nothing to pair."""
        self._held = None

    def sample(
        self,
        verified: int,
        drafting: int | None,
        batch_size: int,
        step_s: float,
        prompt: int,
        price: Callable[[int], float | None],
    ) -> tuple[int, float] | None:
        """The steady-state sample this step gives, if any.

        ``drafting`` is the K drafted at the end of the step (None: the engine drafts
        within the step, as the simulator does); ``price(g)`` the model's current
        steady-state time of gamma ``g`` at this batch, None when it has none.
        """
        held, self._held = self._held, None
        if drafting is None or drafting == verified:
            return verified, step_s
        if prompt:
            return None
        if (
            held is not None
            and held.batch_size == batch_size
            and (held.verified, held.drafting) == (drafting, verified)
        ):
            other = price(drafting)
            if other is None:
                return None
            steady = held.step_s + step_s - other
            return (verified, steady) if steady > 0.0 else None
        self._held = _Switch(verified, drafting, batch_size, step_s)
        return None
