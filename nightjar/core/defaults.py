"""Defaults of the settings both engines have, in one place.

The simulator (``nightjar.run.config.RunConfig``) and the live engine
(``nightjar.live.engine_spec.EngineSpec``, ``nightjar live``) read these; vLLM
spells the last two the same way (``--max-num-seqs``, ``--max-num-batched-tokens``),
and these are vLLM's own serving defaults. ``DEFAULT_GAMMA_MAX`` is the longest
speculation every bundled profile's table reaches.
"""

from __future__ import annotations

DEFAULT_GAMMA_MAX = 4
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
# Elastic draft memory: ``auto`` moves the draft out under KV pressure wherever the
# drafter has weights of its own to move (a draft model, EAGLE heads) and never where
# it has none (n-gram, suffix, MTP); ``on`` refuses such a drafter, ``off`` never
# moves it (the paper's baselines). One default for the simulator, the API, sweeps,
# ``nightjar schedule`` and the live engine.
OFFLOAD_MODES = ("auto", "on", "off")
DEFAULT_OFFLOAD = "auto"
# The live engine must size its KV pool and buffers for one request of this many
# tokens (vLLM refuses a pool that cannot hold one), so it has a number where the
# simulator has no limit (``RunConfig.max_model_len`` None): the length the tiny CPU
# test models and short chat traces need.
DEFAULT_MAX_MODEL_LEN = 2048
# A live run costs minutes per policy: the baseline, standard SD (gamma 3) and the paper's.
LIVE_POLICIES = ("nospec", "fixed:3", "nightjar")


def gamma_max_within(gamma_max: int, given: bool, top: int | None) -> int:
    """The longest speculation a run may choose when its profile's table prices gammas
    up to ``top`` (None: any). Past the table a lookup returns the top gamma's time,
    so longer speculation would look free: a default (``given`` false) is lowered to
    ``top``; a value the user gave is kept, for the caller to refuse past it."""
    return top if not given and top is not None and top < gamma_max else gamma_max
