"""Elastic draft memory for a live run, from what the user asked: the memory
controller's settings, the reload's cost, and whether the drafter has weights to move.

Checked before vLLM starts (one-line :class:`~nightjar.errors.NightjarInputError`s
naming the flag). ``offload`` ``auto`` is on only with ``alias_draft``: there the
draft's weights live inside its KV ballast, so the bytes an offload frees become KV
blocks for real. Without aliasing the live engine can only emulate them by withholding
a ballast from the pool while the draft is resident, which costs capacity that a
server without Nightjar would have (vLLM already keeps the draft's weights outside the
pool): ``auto`` stays off there, and ``on`` is the emulation, asked for by name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nightjar.core.drafter import offload_refusal
from nightjar.core.memory import MemoryConfig
from nightjar.errors import NightjarInputError

# The memory controller's thresholds a live run may set (MemoryConfig's fields; each
# is a flag of its name, nightjar.live.run_options.LiveOptions).
THRESHOLDS = ("low_water_blocks", "k_offload", "k_reload", "reload_hold_s", "min_dwell_s",
              "regret_window_s", "max_dwell_s")


def flag_of(name: str) -> str:
    """How the command line spells a field (``k_offload`` -> ``--k-offload``)."""
    return "--" + name.replace("_", "-")


def memory_config(
    offload: str,
    alias_draft: bool,
    reload: str = "drain",
    thresholds: Mapping[str, Any] | None = None,
    reload_on_gain: bool = True,
    offload_on_capacity: bool = True,
) -> MemoryConfig | None:
    """The memory controller's settings, or None where elastic memory is off; a
    threshold (None: not given) or a switch given without it is refused. Whether the
    drafter has weights to move is checked once it is resolved (:func:`check_offload`)."""
    given: dict[str, Any] = {
        name: (thresholds or {}).get(name) for name in THRESHOLDS
        if (thresholds or {}).get(name) is not None
    }
    if not reload_on_gain:
        given["reload_on_gain"] = False
    if not offload_on_capacity:
        given["offload_on_capacity"] = False
    if offload == "off" or (offload == "auto" and not alias_draft):
        if reload == "migrate":
            raise NightjarInputError(
                "--reload migrate needs --offload on, or auto with --alias-draft (no draft "
                "reload without it)"
            )
        if given:
            raise NightjarInputError(
                f"{flag_of(next(iter(given)))} sets the memory controller: add --offload on")
        return None
    return MemoryConfig(**given)  # raises a one-line NightjarInputError on a bad value


def check_alias(alias_draft: bool, memory: MemoryConfig | None, forced: bool) -> None:
    """Without the memory controller (or forced moves) no ballast is withheld: the KV
    pool would hand out the very blocks that hold the draft's weights."""
    if alias_draft and memory is None and not forced:
        raise NightjarInputError("--alias-draft needs --offload on or auto (the ballast holds"
                                 " the draft)")


def reload_cost(given: float | None, profile: str | None,
                memory: MemoryConfig | None) -> float | None:
    """Seconds a reload costs, for the early reload on forgone gain: ``given``, else
    estimated from ``profile`` when it is a nightjar profile; None turns it off."""
    if given is not None:
        if memory is None:
            raise NightjarInputError("--reload-cost-s sets the memory controller: add --offload on")
        if not given >= 0.0:
            raise NightjarInputError(f"--reload-cost-s must be >= 0, got {given}")
        return float(given)
    if memory is None or profile is None:
        return None
    from nightjar.live.profiling.latency import load_latency, reload_cost_estimate

    return reload_cost_estimate(load_latency(profile)[0])


def check_offload(method: str, offload: str, memory: MemoryConfig | None, forced: bool,
                  alias_draft: bool, ballast_given: bool) -> None:
    """Refuse moving a drafter that has no weights of its own (ngram, suffix, mtp):
    ``--offload on``, forced moves, ``--alias-draft`` or ``--ballast-blocks``."""
    why = offload_refusal(method)
    if why is None:
        return
    flag = "--alias-draft" if alias_draft else "--ballast-blocks"
    if offload == "auto" and not forced:
        # Nothing to move: auto means off here, and the flags that need a draft say so.
        if alias_draft or ballast_given:
            raise NightjarInputError(f"{flag}: {why}")
        return
    if memory is not None or forced:
        raise NightjarInputError(f"--offload on: {why}")
    if alias_draft or ballast_given:
        raise NightjarInputError(f"{flag}: {why}")
