"""What an engine does with the draft's KV cache on a gamma = 0 step, and the default.

``sync``: the draft still runs one forward pass over the step's new tokens, so its
KV cache stays current and speculation can resume at no catch-up cost; every gamma 0
step pays that pass. ``skip``: the draft does not run; its cache goes stale and the
next speculative step pays a draft prefill over the missed tokens (the switch cost).

The default is ``sync`` in every engine because it is what vLLM does: in vLLM 0.32.0
the draft-model proposer (``v1/spec_decode/llm_base_proposer.py``, ``propose``) runs
its first forward pass before it looks at the number of tokens asked for, and at
K = 0 returns an empty draft right after that pass ("to keep the drafter KV cache in
sync"). ``skip`` is Nightjar's own option (the live worker replaces ``propose`` on
gamma 0 steps) and the paper's engine's behaviour.
"""

from __future__ import annotations

from typing import Protocol

DRAFT_KV_MODES = ("sync", "skip")
DEFAULT_DRAFT_KV = "sync"


class SyncedDraftLatency:
    """A latency model whose gamma 0 includes the ``sync`` draft forward.

    A profile's gamma-0 row is the engine without a draft; in ``sync`` mode a
    draft-loaded engine also runs the draft once on every gamma 0 step (its own
    ``draft_forward`` table). A policy planning with the bare row underprices gamma 0
    against what the engine will run, and a correction learned from the steps that
    ran then mixes that gap into its estimate of the profile's error. Measured step
    tables need no wrapper: their gamma-0 rows were recorded with the draft's pass.
    """

    def __init__(self, profile: DraftForwardModel) -> None:
        self.profile = profile

    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float:
        t = self.profile.step_time_s(batch_size, gamma, context_len)
        if gamma == 0:
            t += self.profile.draft_forward_s(batch_size, context_len)
        return t


class DraftForwardModel(Protocol):
    def step_time_s(self, batch_size: int, gamma: int, context_len: float) -> float: ...

    def draft_forward_s(self, batch_size: int, context_len: float) -> float: ...
