"""The elastic draft-memory controller: when to move the draft model out and back.

Engine-neutral: it only sequences states. The engine (simulator or vLLM) performs the
transfers, grows the KV pool when an offload completes, takes the draft's blocks back
during a reload, and reports completion with :meth:`MemoryController.offload_done` /
:meth:`MemoryController.reload_done`. See ``docs/memory.md`` for the full contract.

State machine (no other edges exist)::

    RESIDENT --START_OFFLOAD--> OFFLOADING --offload_done--> OFFLOADED
    OFFLOADED --START_RELOAD--> RELOADING  --reload_done-->  RESIDENT
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, StrEnum

from nightjar.core.types import Decision, StepContext
from nightjar.errors import NightjarInputError


class DraftState(StrEnum):
    """Where the draft model is; the values are what the per-step CSV records."""

    RESIDENT = "resident"
    OFFLOADING = "offloading"
    OFFLOADED = "offloaded"
    RELOADING = "reloading"


class Action(Enum):
    """What the engine must start after :meth:`MemoryController.step`."""

    NONE = "none"
    START_OFFLOAD = "start_offload"
    START_RELOAD = "start_reload"


@dataclass(frozen=True, slots=True)
class MemoryConfig:
    """Thresholds of the controller. Reasons for the defaults are in ``docs/memory.md``.

    Offloading reacts fast (pressure costs preemptions now); reloading is filtered
    harder (staying offloaded only forgoes speculation gain), which is what keeps the
    controller from thrashing:

    - ``low_water_blocks``, ``k_offload``, ``k_reload``: the paper's code (150 free
      blocks, 3 consecutive steps).
    - ``reload_hold_s``: the room for the draft must also last this many seconds.
    - ``min_dwell_s``: least stay in RESIDENT or OFFLOADED after a transition.
    - ``regret_window_s`` / ``max_dwell_s``: a reload is regretted when the draft is
      offloaded again within the window of coming back; each regretted reload doubles
      the next OFFLOADED dwell, up to ``max_dwell_s``; an unregretted one resets it.
    - ``reload_on_gain``: allow the early reload when forgone speculation gain has
      paid for the reload (see :meth:`MemoryController.step`).
    - ``offload_on_capacity``: the joint decision on gamma and residency. Offload
      also while the policy still speculates, when the engine's step-time model
      says the draft's blocks are worth more to requests waiting for them than
      speculation buys (``capacity_gain`` > 0 for ``k_offload`` steps; see
      :func:`nightjar.core.driver.StepDriver.capacity_gain`).
    """

    enabled: bool = True
    low_water_blocks: int = 150
    k_offload: int = 3
    k_reload: int = 3
    reload_hold_s: float = 1.0
    min_dwell_s: float = 2.0
    regret_window_s: float = 5.0
    max_dwell_s: float = 30.0
    reload_on_gain: bool = True
    offload_on_capacity: bool = True

    def __post_init__(self) -> None:
        if self.low_water_blocks < 0:
            raise NightjarInputError(
                f"memory: low_water_blocks must be >= 0, got {self.low_water_blocks}"
            )
        if self.k_offload < 1 or self.k_reload < 1:
            raise NightjarInputError(
                f"memory: k_offload and k_reload must be >= 1, got "
                f"{self.k_offload} and {self.k_reload}"
            )
        for name in ("reload_hold_s", "min_dwell_s", "regret_window_s", "max_dwell_s"):
            value = getattr(self, name)
            if not value >= 0.0:  # also rejects NaN
                raise NightjarInputError(f"memory: {name} must be >= 0, got {value}")
        if self.max_dwell_s < self.min_dwell_s:
            raise NightjarInputError(
                f"memory: max_dwell_s ({self.max_dwell_s}) is below min_dwell_s "
                f"({self.min_dwell_s})"
            )


def pool_binds(ctx: StepContext) -> bool:
    """Whether more KV blocks would let the engine run more of its queue now.

    Invariant: true only where blocks, not seats, hold work back. The prompts still
    to prefill (the waiting queue's and the unfinished chunked ones,
    ``pending_blocks``) must need more blocks than are free (where the engine gives
    no block size, any waiting request counts), or a waiting request was preempted;
    and the batch must be under the engine's cap (``max_num_seqs``): at the cap the
    draft's blocks would admit nobody. The paper's rule counted every waiting
    request, so a fresh arrival about to be admitted (one every step at 28 req/s)
    made the pool "short" with thousands of blocks free, and the draft was moved out
    for nothing.
    """
    if ctx.num_waiting <= 0 and ctx.prefill_tokens_left <= 0:
        return False
    if ctx.max_num_seqs > 0 and ctx.batch_size >= ctx.max_num_seqs:
        return False
    if ctx.kv_block_size <= 0:
        return ctx.num_waiting > 0
    return ctx.pending_blocks > ctx.kv_free_blocks or ctx.num_preempted_waiting > 0


def clamp_decision(decision: Decision, ctx: StepContext) -> Decision:
    """Clip a decision to ``0..gamma_max`` and to 0 while the draft is away."""
    if isinstance(decision, int):
        return 0 if not ctx.draft_resident else max(0, min(decision, ctx.gamma_max))
    if not ctx.draft_resident:
        return [0] * len(decision)
    return [max(0, min(int(g), ctx.gamma_max)) for g in decision]


def _wants_speculation(decision: Decision) -> bool:
    if isinstance(decision, int):
        return decision > 0
    return any(int(g) > 0 for g in decision)


class MemoryController:
    """Decides when the draft leaves device memory and when it comes back.

    Per engine step, in this order: build the ``StepContext`` with
    ``draft_resident=controller.draft_resident``; ``decision = policy.decide(ctx)``;
    ``action = controller.step(ctx, decision, spec_gain_s)``; start the transfer the
    action names; ``gamma, clamped = controller.runnable(decision, ctx)``; run the
    step and report ``clamped`` in the ``StepOutcome``.

    ``draft_blocks`` is the draft's footprint in KV blocks: what the pool gains when
    an offload completes and what a reload takes back. ``reload_cost_s`` is the
    engine's estimate of what a reload costs in service seconds (un-hidden transfer
    time plus rebuilding the draft's KV cache); without it the gain hook is off.
    """

    def __init__(
        self, config: MemoryConfig, draft_blocks: int, reload_cost_s: float | None = None
    ) -> None:
        if draft_blocks < 0:
            raise NightjarInputError(f"memory: draft_blocks must be >= 0, got {draft_blocks}")
        if reload_cost_s is not None and not reload_cost_s >= 0.0:
            raise NightjarInputError(f"memory: reload_cost_s must be >= 0, got {reload_cost_s}")
        self.config = config
        self.draft_blocks = draft_blocks
        self.reload_cost_s = reload_cost_s
        self.state = DraftState.RESIDENT
        self.offloads = 0  # offloads started
        self.reloads = 0  # reloads started
        self.gain_reloads = 0  # of which the gain hook triggered
        self.capacity_offloads = 0  # offloads the joint (capacity) rule started
        self.regretted = 0  # reloads followed by an offload within the regret window
        # (time, new state) per transition. The first entry is written on the first
        # step, so the controller needs no clock when it is built.
        self.history: list[tuple[float, DraftState]] = []
        self._entered_s: float | None = None  # when the current state began
        self._time_in: dict[DraftState, float] = dict.fromkeys(DraftState, 0.0)
        # Least stay in OFFLOADED; grows by backoff, min_dwell_s <= it <= max_dwell_s.
        self.offloaded_dwell_s = config.min_dwell_s
        # Streaks of the offload / reload conditions. Invariant: reset on every
        # transition, so a finished transfer always starts a fresh count.
        self._short_steps = 0
        self._slack_steps = 0
        self._room_since: float | None = None
        self._forgone_s = 0.0  # speculation gain forgone over consecutive steps

    @property
    def draft_resident(self) -> bool:
        """True only in RESIDENT: once an offload starts the draft is unusable."""
        return self.state is DraftState.RESIDENT

    def effective_gamma(self, decision: Decision) -> tuple[Decision, bool]:
        """The decision the engine may run, and whether it overrode the policy.

        While the draft is not resident every gamma becomes 0; ``clamped`` is true only
        when the policy asked for speculation, so a chosen 0 is still credited to arm 0.
        """
        if self.draft_resident:
            return decision, False
        clamped = _wants_speculation(decision)
        if isinstance(decision, int):
            return 0, clamped
        return [0] * len(decision), clamped

    def runnable(self, decision: Decision, ctx: StepContext) -> tuple[Decision, bool]:
        """What the engine may run of ``decision``: :meth:`effective_gamma`, each gamma
        then clipped to ``0..ctx.gamma_max`` (0 where the step's context has the draft
        away); ``clamped`` as :meth:`effective_gamma` says."""
        decision, clamped = self.effective_gamma(decision)
        return clamp_decision(decision, ctx), clamped

    def step(
        self,
        ctx: StepContext,
        decision: Decision,
        spec_gain_s: float | None = None,
        capacity_gain: float | None = None,
    ) -> Action:
        """Advance the controller by one engine step; returns the transfer to start.

        ``decision`` is the policy's choice before any clamp. ``spec_gain_s`` is the
        optional estimate of the seconds one step would save by speculating now (best
        gamma against gamma 0, at this batch); it only matters while OFFLOADED.
        ``capacity_gain`` is the optional relative throughput gain of giving the
        draft's blocks to waiting requests (> 0: worth more than speculation); it
        only matters while RESIDENT.
        """
        if self._entered_s is None:
            self._enter(self.state, ctx.now)
        if not self.config.enabled or self.state in (
            DraftState.OFFLOADING,
            DraftState.RELOADING,
        ):
            return Action.NONE
        if self.state is DraftState.RESIDENT:
            return self._step_resident(ctx, decision, capacity_gain)
        return self._step_offloaded(ctx, spec_gain_s)

    def _stayed(self, now: float, dwell_s: float) -> bool:
        # The run's first stay follows no transition, so it has nothing to dwell on.
        first = len(self.history) == 1
        return first or (self._entered_s is not None and now - self._entered_s >= dwell_s)

    def _step_resident(
        self, ctx: StepContext, decision: Decision, capacity_gain: float | None
    ) -> Action:
        cfg = self.config
        short = ctx.kv_free_blocks < cfg.low_water_blocks or pool_binds(ctx)
        chose_zero = not _wants_speculation(decision)
        # The joint rule: the blocks are worth more than speculation even though the
        # policy still speculates (it prices only the running batch's steps).
        rent = (
            cfg.offload_on_capacity and capacity_gain is not None and capacity_gain > 0.0
        )
        self._short_steps = self._short_steps + 1 if (short and chose_zero) or rent else 0
        if self._short_steps < cfg.k_offload or not self._stayed(ctx.now, cfg.min_dwell_s):
            return Action.NONE
        if not chose_zero:
            self.capacity_offloads += 1
        if self.reloads > 0 and self._entered_s is not None:
            if ctx.now - self._entered_s < cfg.regret_window_s:
                self.regretted += 1
                self.offloaded_dwell_s = min(2.0 * self.offloaded_dwell_s, cfg.max_dwell_s)
            else:
                self.offloaded_dwell_s = cfg.min_dwell_s
        self.offloads += 1
        self._enter(DraftState.OFFLOADING, ctx.now)
        return Action.START_OFFLOAD

    def _step_offloaded(self, ctx: StepContext, spec_gain_s: float | None) -> Action:
        cfg = self.config
        # The pool counts the draft's blocks now, so "free > footprint + mark" means
        # free stays above the mark once the reload takes them back: a reload never
        # by itself re-creates the offload condition (the hysteresis band).
        room = ctx.kv_free_blocks > self.draft_blocks + cfg.low_water_blocks
        # The hold watches only the room, the slow signal; a request waiting for a
        # step (an arrival about to be admitted) restarts the k-step count, not the
        # hold, so a lightly loaded engine with steady arrivals still gets its draft.
        if room and self._room_since is None:
            self._room_since = ctx.now
        elif not room:
            self._room_since = None
        self._slack_steps = self._slack_steps + 1 if room and ctx.num_waiting == 0 else 0
        gain_paid = self._gain_pays(ctx, spec_gain_s)
        if not self._stayed(ctx.now, self.offloaded_dwell_s):
            return Action.NONE
        held = (
            self._room_since is not None
            and self._slack_steps >= cfg.k_reload
            and ctx.now - self._room_since >= cfg.reload_hold_s
        )
        if not (held or gain_paid):
            return Action.NONE
        if gain_paid and not held:
            self.gain_reloads += 1
        self.reloads += 1
        self._enter(DraftState.RELOADING, ctx.now)
        return Action.START_RELOAD

    def _gain_pays(self, ctx: StepContext, spec_gain_s: float | None) -> bool:
        # Rent-or-buy: reload once the speculation gain forgone over consecutive steps
        # exceeds the reload's cost, which costs at most twice the best offline choice.
        # Only where the free blocks already cover the draft, so an early reload never
        # forces the engine to preempt running requests.
        cost = self.reload_cost_s
        if (
            not self.config.reload_on_gain
            or cost is None
            or spec_gain_s is None
            or not spec_gain_s > 0.0  # also NaN: no evidence, so the streak ends
            or ctx.kv_free_blocks < self.draft_blocks
        ):
            self._forgone_s = 0.0
            return False
        self._forgone_s += spec_gain_s
        return self._forgone_s > cost

    def force(self, action: Action, now: float) -> bool:
        """Start a transfer regardless of the thresholds (operator command or test).

        Only from the state the action leaves (RESIDENT for an offload, OFFLOADED for a
        reload); returns False and changes nothing otherwise. Counted like any other.
        """
        if action is Action.START_OFFLOAD and self.state is DraftState.RESIDENT:
            self.offloads += 1
            self._enter(DraftState.OFFLOADING, now)
            return True
        if action is Action.START_RELOAD and self.state is DraftState.OFFLOADED:
            self.reloads += 1
            self._enter(DraftState.RELOADING, now)
            return True
        return False

    def offload_done(self, now: float) -> None:
        """The engine finished moving the draft out; its blocks are in the pool now."""
        self._finish(DraftState.OFFLOADING, DraftState.OFFLOADED, now)

    def reload_done(self, now: float) -> None:
        """The draft is back and its blocks withheld; it may speculate from the next step."""
        self._finish(DraftState.RELOADING, DraftState.RESIDENT, now)

    def _finish(self, expected: DraftState, new: DraftState, now: float) -> None:
        if self.state is not expected:
            # An engine bug, not user input: an engine may only report the transfer
            # that the controller asked it to start.
            raise RuntimeError(f"memory: {new.value} reported in state {self.state.value}")
        self._enter(new, now)

    def _enter(self, state: DraftState, now: float) -> None:
        if self._entered_s is not None:
            self._time_in[self.state] += max(0.0, now - self._entered_s)
        self.state = state
        self._entered_s = now
        self._short_steps = 0
        self._slack_steps = 0
        self._room_since = None
        self._forgone_s = 0.0
        self.history.append((now, state))

    def time_in(self, state: DraftState, now: float) -> float:
        """Seconds spent in ``state`` up to ``now`` (the current stay included)."""
        total = self._time_in[state]
        if self.state is state and self._entered_s is not None:
            total += max(0.0, now - self._entered_s)
        return total

    def summary(self, now: float) -> dict[str, float]:
        """Scalars for ``RunResult.extra``: counts, and seconds per state up to ``now``."""
        out: dict[str, float] = {
            # 1 where elastic memory ran (--offload on, or auto resolved on), else 0:
            # what `nightjar validate` replays a live run with.
            "elastic_memory": float(self.config.enabled),
            "offloads": float(self.offloads),
            "reloads": float(self.reloads),
            "gain_reloads": float(self.gain_reloads),
            "capacity_offloads": float(self.capacity_offloads),
            "regretted_reloads": float(self.regretted),
        }
        for state in DraftState:
            out[f"time_{state.value}_s"] = self.time_in(state, now)
        return out
