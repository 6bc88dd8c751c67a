"""Which requests the engine can ever serve, and how long: the check made before a
run starts.

A request can run only if

- its prompt is no longer than ``max_model_len``, the smaller of the config's
  (``--max-model-len``) and the profile's (the model's context window, or a
  deployment's pin, as the paper-config profiles pin 2048): vLLM refuses a longer
  prompt. One whose prompt fits but whose answer would run past the window stops
  there, as vLLM's scheduler stops it (``FINISHED_LENGTH_CAPPED``), with at least the
  token its prefill samples: its output is cut to ``max_model_len - prompt``;
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
to skip, left out and counted as rejected. Cut answers are counted too.
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
    # Requests kept whose answers stop at max_model_len, and the outputs they keep
    # (indices into the trace; both empty when none is cut).
    capped: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64))
    capped_output: np.ndarray = dataclasses.field(
        default_factory=lambda: np.empty(0, np.int64))
    window: str = ""  # who set max_model_len and to what, for messages

    def cut_note(self) -> str:
        """One line on the answers cut at the window; "" when none is."""
        if not self.capped.size:
            return ""
        return (f"{self.capped.size} answer(s) stop at {self.window} (prompt + output), "
                "as vLLM stops them")

    def apply(self, trace: Trace) -> Trace:
        """``trace`` as the run serves it: without the rejected requests, and with the
        answers cut at the window (the same object when nothing changes)."""
        if not self.rejected.size and not self.capped.size:
            return trace
        output = trace.output_tokens
        if self.capped.size:
            output = output.copy()
            output[self.capped] = self.capped_output
        k = self.kept
        return dataclasses.replace(
            trace,
            arrival_s=trace.arrival_s[k],
            prompt_tokens=trace.prompt_tokens[k],
            output_tokens=output[k],
            workload=trace.workload[k],
            acceptance=trace.acceptance[k],
            prompts=None if trace.prompts is None else [trace.prompts[i] for i in k.tolist()],
            speculate=None if trace.speculate is None else trace.speculate[k],
        )


def kv_capacity(profile: Profile, config: SimConfig) -> int:
    """The most KV blocks the engine's pool ever holds under ``config``."""
    return profile.memory.kv_blocks(draft_resident=not config.offload)


def max_model_len(profile: Profile, config: SimConfig) -> tuple[int | None, str]:
    """The run's ``max_model_len`` (``MemoryFacts.window``), and who set it."""
    limit = profile.memory.window(config.max_model_len)
    if limit == config.max_model_len:
        return limit, "--max-model-len"
    return limit, f"profile {profile.name}'s max_model_len"


def check_fit(trace: Trace, profile: Profile, config: SimConfig) -> Fit:
    """Split the trace into requests that can run and those that never can, and cut
    the answers that would run past the window."""
    cap = kv_capacity(profile, config)
    bs = profile.memory.block_size
    limit, by = max_model_len(profile, config)
    prompt, output = trace.prompt_tokens, trace.output_tokens
    # Trace token counts are at most MAX_TOKENS (2**40), so int64 sums cannot wrap.
    bound = limit if limit is not None else np.iinfo(np.int64).max
    too_long = prompt > bound
    cut = ~too_long & (prompt + output > bound)
    served = np.where(cut, np.maximum(bound - prompt, 1), output)
    need = -(-(prompt + served) // bs)
    unfit = (need > cap) | too_long
    bad = np.flatnonzero(unfit)
    kept = np.flatnonzero(~unfit)
    capped = np.flatnonzero(cut & ~unfit)
    message = ""
    if bad.size:
        long = np.flatnonzero(too_long)
        if long.size:
            i = int(long[0])
            message = (
                f"{long.size} request(s) have prompts longer than {by} {limit} tokens "
                f"(the first: request {i}, arrival {float(trace.arrival_s[i]):g} s, "
                f"prompt {int(prompt[i])} tokens)"
            )
        else:
            i = int(bad[0])
            where = ("without the draft (--offload on)" if config.offload
                     else "with the draft resident")
            message = (
                f"request {i} (arrival {float(trace.arrival_s[i]):g} s, prompt "
                f"{int(prompt[i])} + output {int(served[i])} tokens) needs {int(need[i])} "
                f"KV blocks of {bs} tokens, but the pool of profile {profile.name} never "
                f"holds more than {cap} {where}"
            )
        rest = bad.size - (long.size if long.size else 1)
        if rest:
            message += f"; {rest} more request(s) cannot run either"
    return Fit(kept, bad, cap, message, capped, served[capped], f"{by} {limit}")


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
