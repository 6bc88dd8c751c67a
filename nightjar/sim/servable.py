"""Which requests the engine can ever serve: the check made before a run starts.

A request can run only if

- it is no longer than ``max_model_len`` (prompt + output tokens), the smaller of
  the config's (``--max-model-len``) and the profile's (a model's context window, as
  the paper-config profiles pin 2048) where either is set: vLLM refuses longer
  requests, and a model cannot attend past its window;
- alone in the engine, its whole context fits the largest KV pool the engine can
  ever have: ``ceil((prompt + output) / block_size)`` blocks. Its last decode step
  holds ``prompt + output - 1`` tokens plus the one it writes; speculation is cut to
  what the pool leaves a lone request, so lookahead never decides whether a request
  can run. The largest pool is the one without the draft when the draft may be
  offloaded (``--offload on``), else the one with it.

The token budget and the sequence slots never stop a lone request (an over-budget
prompt is admitted alone, standing in for chunked prefill), so they add no limit.

A request that fails the check would wait forever at the head of the FCFS queue, so
it is refused before the first step (one line naming it), or, when the caller asks
to skip, left out and counted as rejected.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from nightjar.errors import NightjarInputError
from nightjar.profile.profile import Profile
from nightjar.sim.knobs import SimConfig
from nightjar.trace.trace import Trace


class OnUnfit(StrEnum):
    """What a run does with requests that can never run (``--on-unfit``)."""

    REFUSE = "refuse"
    SKIP = "skip"


@dataclass(frozen=True)
class Fit:
    """The requests a run keeps (indices into the trace) and those it rejected."""

    kept: np.ndarray
    rejected: np.ndarray
    capacity_blocks: int
    message: str  # names the first rejected request; "" when none is

    def apply(self, trace: Trace) -> Trace:
        """``trace`` without the rejected requests (the same object when none is)."""
        if not self.rejected.size:
            return trace
        k = self.kept
        return dataclasses.replace(
            trace,
            arrival_s=trace.arrival_s[k],
            prompt_tokens=trace.prompt_tokens[k],
            output_tokens=trace.output_tokens[k],
            workload=trace.workload[k],
            acceptance=trace.acceptance[k],
            prompts=None if trace.prompts is None else [trace.prompts[i] for i in k.tolist()],
            speculate=None if trace.speculate is None else trace.speculate[k],
        )


def kv_capacity(profile: Profile, config: SimConfig) -> int:
    """The most KV blocks the engine's pool ever holds under ``config``."""
    return profile.memory.kv_blocks(draft_resident=not config.offload)


def max_model_len(profile: Profile, config: SimConfig) -> tuple[int | None, str]:
    """The longest request (prompt + output tokens) the run serves, and who set it."""
    pinned = profile.memory.max_model_len
    asked = config.max_model_len
    if pinned is not None and (asked is None or pinned < asked):
        return pinned, f"profile {profile.name}'s max_model_len"
    return asked, "--max-model-len"


def check_fit(trace: Trace, profile: Profile, config: SimConfig) -> Fit:
    """Split the trace into requests that can run and those that never can."""
    cap = kv_capacity(profile, config)
    bs = profile.memory.block_size
    # Trace token counts are at most MAX_TOKENS (2**40), so the int64 sum cannot wrap.
    tokens = trace.prompt_tokens + trace.output_tokens
    need = -(-tokens // bs)
    limit, by = max_model_len(profile, config)
    too_long = tokens > (limit or np.iinfo(np.int64).max)
    unfit = (need > cap) | too_long
    bad = np.flatnonzero(unfit)
    kept = np.flatnonzero(~unfit)
    message = ""
    if bad.size:
        i = int(bad[0])
        what = (f"request {i} (arrival {float(trace.arrival_s[i]):g} s, prompt "
                f"{int(trace.prompt_tokens[i])} + output {int(trace.output_tokens[i])} tokens)")
        if too_long[i]:
            message = f"{what} is longer than {by} {limit}"
        else:
            where = ("without the draft (--offload on)" if config.offload
                     else "with the draft resident")
            message = (
                f"{what} needs {int(need[i])} KV blocks of {bs} tokens, but the pool of "
                f"profile {profile.name} never holds more than {cap} {where}"
            )
        if bad.size > 1:
            message += f"; {bad.size - 1} more request(s) cannot run either"
    return Fit(kept, bad, cap, message)


def fit_or_refuse(
    trace: Trace, profile: Profile, config: SimConfig, on_unfit: OnUnfit = OnUnfit.REFUSE
) -> Fit:
    """:func:`check_fit`, raising a one-line error where requests cannot run and the
    caller did not ask to skip them (or where none can run at all)."""
    fit = check_fit(trace, profile, config)
    if fit.rejected.size and (on_unfit is OnUnfit.REFUSE or not fit.kept.size):
        hint = "; pass --on-unfit skip to leave such requests out" if fit.kept.size else (
            "; no request of the trace fits"
        )
        raise NightjarInputError(fit.message + hint)
    return fit
