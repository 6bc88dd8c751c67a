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

DRAFT_KV_MODES = ("sync", "skip")
DEFAULT_DRAFT_KV = "sync"
