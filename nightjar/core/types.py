"""The engine-neutral step contract between an engine and a policy.

Each engine step, the engine builds a :class:`StepContext`, asks the policy for a
:data:`Decision`, runs the step, and reports a :class:`StepOutcome`. Both the
simulator and the live vLLM engine speak only these types.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

# One speculation length for the whole batch, or one per running request (in the
# order of ``StepContext.request_ids``). vLLM only supports the former.
Decision = int | Sequence[int]


# StepContext and StepOutcome are read-only by contract (an engine builds a fresh one
# per step; a policy never writes to one) but not ``frozen``: a frozen dataclass's
# __init__ goes through object.__setattr__ per field, and building the two of them
# was a tenth of a simulated step (measured: 32k and 24k instructions against 12k
# and 9k for these).
@dataclass(slots=True)
class StepContext:
    """What the engine knows when it must choose gamma for the next step.

    Invariants: ``0 <= kv_free_blocks <= kv_total_blocks``; ``batch_size`` is the
    batch the step's gamma is priced at (>= 1 when a decision is asked for): the
    running requests plus, in both V1 engines, the waiting ones the step admits
    (``nightjar.core.admission.step_batch``); when ``draft_resident`` is false the engine
    clamps any gamma to 0.
    """

    now: float
    batch_size: int
    num_waiting: int
    kv_free_blocks: int
    kv_total_blocks: int
    draft_resident: bool
    gamma_max: int
    mean_context_len: float = 0.0
    # Stable ids of the running requests, in the order per-request decisions use.
    request_ids: Sequence[int] | None = None
    # Per-request acceptance estimates the engine has measured so far (TETRIS-like
    # policies); ``None`` where the engine does not track them.
    acceptance_estimates: Sequence[float] | None = None
    # Requests that arrived in the last ``nightjar.core.arrivals.ARRIVAL_WINDOW_S`` seconds
    # over that window (req/s); ``None`` where the engine does not know.
    arrival_rate_rps: float | None = None
    # The true per-request acceptance rates. Only the simulator knows them, and only
    # the ``oracle`` policy may read them.
    true_acceptance: Sequence[float] | None = None
    # The longest context among the decoding requests (tokens in their KV). With the
    # mean it tells one long request among short ones from a uniformly long batch.
    max_context_len: float = 0.0
    # KV pressure beyond the free-block count: how many waiting requests were
    # preempted (they lost their blocks and must recompute), the tokens the waiting
    # queue must prefill before it runs (its KV demand), and the pool's block size
    # in tokens (0 where the engine does not say), which turns tokens into blocks.
    num_preempted_waiting: int = 0
    waiting_tokens: int = 0
    kv_block_size: int = 0
    # The engine's cap on running requests (vLLM's max_num_seqs; 0: unknown). More
    # KV blocks admit nobody once the batch is at the cap, so pricing the draft's
    # memory needs it.
    max_num_seqs: int = 0
    # Prompt tokens the running requests still have to prefill (chunked prompts; 0
    # where the engine does not say): KV demand the waiting queue's does not count.
    prefill_tokens_left: int = 0

    @property
    def kv_used_fraction(self) -> float:
        """Share of the pool's blocks in use, 0 for an empty (or unknown) pool."""
        total = self.kv_total_blocks
        return (total - self.kv_free_blocks) / total if total > 0 else 0.0

    @property
    def waiting_blocks(self) -> int:
        """Blocks the waiting queue needs to run (0 where the block size is unknown)."""
        bs = self.kv_block_size
        return -(-self.waiting_tokens // bs) if bs > 0 else 0

    @property
    def pending_blocks(self) -> int:
        """Blocks the prompts not yet decoding need: the waiting queue's and the rest of
        the running chunked prompts (0 where the block size is unknown)."""
        bs = self.kv_block_size
        return -(-(self.waiting_tokens + self.prefill_tokens_left) // bs) if bs > 0 else 0


@dataclass(slots=True)
class StepOutcome:
    """What happened in a step, reported back to the policy.

    ``gamma`` is what actually ran (after any clamp), which may differ from what
    the policy chose; ``clamped`` says the engine overrode the policy (e.g. the
    draft was offloaded), so learning policies should not credit the arm.
    ``emitted`` counts tokens appended to outputs, ``accepted`` the accepted draft
    tokens (``emitted = accepted + batch_size`` for a pure decode step).
    """

    gamma: int
    batch_size: int
    step_time_s: float
    drafted: int
    accepted: int
    emitted: int
    switch_cost_s: float = 0.0
    clamped: bool = False
    # Prompt tokens prefilled in the same step (mixed batches): their time is in
    # ``step_time_s`` but belongs to admission, not to the chosen gamma.
    prefill_tokens: int = 0
    # Per-request (drafted, accepted) in ``StepContext.request_ids`` order, where known.
    request_ids: Sequence[int] | None = None
    per_request_accepted: Sequence[int] | None = None
    per_request_drafted: Sequence[int] | None = None
    # K drafted at the end of this step for the next one, where the engine drafts a
    # step ahead (vLLM V1: the step's time is verify(gamma) + draft(this K)); None
    # where drafting is part of the step it is verified in (the simulator).
    drafting_gamma: int | None = None

    @property
    def paid_switch(self) -> bool:
        return self.switch_cost_s > 0.0


class LatencyModel(Protocol):
    """Predicted decode step time; a :class:`nightjar.profile.profile.Profile` is one.

    Policies that plan with the hardware's latency (``dsd``, ``oracle``, priors)
    depend only on this, not on the profile's file format.
    """

    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float: ...


# Here rather than beside its one user (nightjar.core.driver): mypyc, which compiles the
# driver (setup.py), cannot build a runtime-checkable protocol.
@runtime_checkable
class PrefillLatency(Protocol):
    """A latency model that also prices prompts (a profile does; a step table does not)."""

    def prefill_time_s(self, num_tokens: int) -> float: ...

    def draft_prefill_time_s(self, num_tokens: int) -> float: ...
