"""Validation of trace JSON into typed specs; every error is one line naming the field.

Kept apart from :mod:`nightjar.trace.trace` so that the format's rules (which keys, which
ranges) live in one place; ``trace.py`` only materializes validated specs.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nightjar.errors import NightjarInputError
from nightjar.trace.workloads import MAX_TOKENS, WORKLOADS, LengthDist

FORMAT_VERSION = 1
DEFAULT_WORKLOAD = "sharegpt"
# A guard against typos such as rate_rps 10000 for an hour: the expected request
# count of a generative trace may not exceed this.
MAX_EXPECTED_REQUESTS = 5_000_000
# Seeds feed numpy's generators, which take non-negative integers; bounded so a
# typo does not silently become a different stream.
MAX_SEED = 2**63 - 1
# Gamma shapes below this make inter-arrival gaps of 0 or inf in float64 and ask
# numpy for astronomically many draws; CV 1/sqrt(1e-3) ~ 32 is burstier than any
# measured trace.
MIN_BURSTINESS = 1e-3
# The steadiest --burstiness a run may ask for (gaps within a few % of the mean).
MAX_BURSTINESS = 1e3
# The latest arrival a trace may have, in seconds from its start: about three years,
# beyond the longest public request log (BurstGPT, ~4 months). Later times are almost
# always Unix time stamps (1.7e9 s, or 1.7e12 in milliseconds) that should have been
# made relative to the first request; simulated, they are years of idling and a
# throughput of zero.
MAX_ARRIVAL_S = 1e8
# Prompt token ids are int32 in every engine nightjar drives (vLLM); the live engine
# also checks them against the target's vocabulary.
MAX_TOKEN_ID = 2**31 - 1

# "$schema": where an editor finds the JSON Schema (nightjar.schemas); ignored here.
_TOP_KEYS = {"$schema", "format_version", "name", "description", "seed", "workload",
             "duration_s", "requests", "segments", "max_requests"}
_REQUEST_KEYS = {"arrival_s", "prompt_tokens", "output_tokens", "prompt", "prompt_token_ids",
                 "workload", "acceptance", "speculate"}
_SEGMENT_KEYS = {"duration_s", "rate_rps", "burstiness", "workload", "mix", "prompt_tokens",
                 "output_tokens", "acceptance", "speculate"}


@dataclass
class RequestColumns:
    arrival_s: list[float] = field(default_factory=list)
    prompt_tokens: list[int] = field(default_factory=list)
    output_tokens: list[int] = field(default_factory=list)
    workload: list[str] = field(default_factory=list)
    acceptance: list[float] = field(default_factory=list)
    prompts: list[str | list[int] | None] = field(default_factory=list)
    speculate: list[bool] = field(default_factory=list)


@dataclass(frozen=True)
class SegmentSpec:
    duration_s: float
    rate_rps: float
    burstiness: float
    workload: str
    prompt_dist: LengthDist | None = None
    output_dist: LengthDist | None = None
    acceptance: float | None = None
    # Workloads served side by side and each one's share of the arrivals (shares sum
    # to 1, in file order); None for a single-workload segment.
    mix: tuple[tuple[str, float], ...] | None = None
    # False: no request of the segment may be speculated (per-request opt-out).
    speculate: bool = True


@dataclass(frozen=True)
class TraceSpec:
    """Exactly one of ``requests`` and ``segments`` is set."""

    source: str
    name: str
    description: str
    seed: int
    duration_s: float | None
    requests: RequestColumns | None
    segments: list[SegmentSpec] | None
    # Keep only the first N requests in arrival order (vLLM's --num-prompts): the
    # trace then ends at its last kept arrival. None keeps them all.
    max_requests: int | None = None


def check_arrival(t: float, where: str) -> float:
    """``t`` if it is a plausible arrival time (seconds from the trace's start)."""
    if t > MAX_ARRIVAL_S:
        if 1e9 <= t < 1e13:
            unit = "milliseconds" if t >= 1e12 else "seconds"
            hint = (f"; it looks like a Unix time stamp in {unit}: arrival times are seconds "
                    "from the first request (subtract the first one"
                    + (", then divide by 1000" if unit == "milliseconds" else "") + ")")
        else:
            hint = ""
        raise NightjarInputError(
            f"{where} {t:.6g} is more than {MAX_ARRIVAL_S:.0e} s (3 years) after the "
            f"trace's start{hint}")
    return t


def check_seed(seed: int, what: str = "--seed") -> int:
    """A seed numpy accepts, or one line naming ``what``."""
    # numpy's integers are integers (a seed taken from an array); bools are not seeds.
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer):
        raise NightjarInputError(f"{what} must be an integer in 0..{MAX_SEED}, got {seed!r}")
    if not 0 <= int(seed) <= MAX_SEED:
        raise NightjarInputError(f"{what} must be an integer in 0..{MAX_SEED}, got {seed!r}")
    return int(seed)


def _check_keys(obj: Mapping[str, Any], allowed: set[str], where: str) -> None:
    for key in obj:
        if key not in allowed:
            near = difflib.get_close_matches(str(key), sorted(allowed), n=1)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise NightjarInputError(f"{where}: unknown field {key!r}{hint}")


def _obj(v: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(v, Mapping):
        raise NightjarInputError(f"{where} must be a JSON object (got {type(v).__name__})")
    return v


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(v: Any, where: str, lo: int | None = None, hi: int = MAX_TOKENS) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise NightjarInputError(f"{where} must be an integer (got {_short(v)})")
    if lo is not None and v < lo:
        raise NightjarInputError(f"{where} must be >= {lo} (got {_short(v)})")
    if v > hi:
        raise NightjarInputError(f"{where} must be <= {hi} (got {_short(v)})")
    return v


def _num(v: Any, where: str, lo: float, lo_open: bool = False, hi_open: float | None = None
         ) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise NightjarInputError(f"{where} must be a finite number (got {_short(v)})")
    if v < lo or (lo_open and v == lo):
        raise NightjarInputError(f"{where} must be {'>' if lo_open else '>='} {lo} (got {v})")
    if hi_open is not None and v >= hi_open:
        raise NightjarInputError(f"{where} must be < {hi_open} (got {v})")
    return float(v)


def _str(v: Any, where: str) -> str:
    if not isinstance(v, str):
        raise NightjarInputError(f"{where} must be a string (got {_short(v)})")
    return v


def _bool(v: Any, where: str) -> bool:
    if not isinstance(v, bool):
        raise NightjarInputError(f"{where} must be true or false (got {_short(v)})")
    return v


def _workload(v: Any, where: str) -> str:
    name = _str(v, where)
    if name not in WORKLOADS:
        raise NightjarInputError(
            f"{where}: unknown workload {name!r} (known: {', '.join(sorted(WORKLOADS))})"
        )
    return name


def _length(v: Any, where: str) -> LengthDist:
    if isinstance(v, int) and not isinstance(v, bool):
        _int(v, where, 1)
        return LengthDist("constant", float(v), lo=v, hi=v)
    return LengthDist.from_json(v, where)


def _parse_request(obj: Any, where: str, default_wl: str, cols: RequestColumns) -> None:
    r = _obj(obj, where)
    _check_keys(r, _REQUEST_KEYS, where)
    for key in ("arrival_s", "output_tokens"):
        if key not in r:
            raise NightjarInputError(f"{where}: missing field {key!r}")
    cols.arrival_s.append(check_arrival(_num(r["arrival_s"], f"{where}.arrival_s", 0.0),
                                        f"{where}.arrival_s"))
    cols.output_tokens.append(_int(r["output_tokens"], f"{where}.output_tokens", 1))
    if "prompt" in r and "prompt_token_ids" in r:
        raise NightjarInputError(f"{where}: give 'prompt' or 'prompt_token_ids', not both")
    prompt: str | list[int] | None = None
    if "prompt" in r:
        prompt = _str(r["prompt"], f"{where}.prompt")
    elif "prompt_token_ids" in r:
        ids = r["prompt_token_ids"]
        if not isinstance(ids, list) or not ids:
            raise NightjarInputError(f"{where}.prompt_token_ids must be a non-empty list")
        prompt = [_int(t, f"{where}.prompt_token_ids[{j}]", 0, MAX_TOKEN_ID)
                  for j, t in enumerate(ids)]
    if "prompt_tokens" in r:
        n = _int(r["prompt_tokens"], f"{where}.prompt_tokens", 1)
        if isinstance(prompt, list) and n != len(prompt):
            raise NightjarInputError(
                f"{where}: prompt_tokens {n} != len(prompt_token_ids) {len(prompt)}"
            )
    elif isinstance(prompt, list):
        n = len(prompt)
    else:
        raise NightjarInputError(f"{where}: missing field 'prompt_tokens'")
    cols.prompt_tokens.append(n)
    cols.prompts.append(prompt)
    cols.workload.append(_workload(r.get("workload", default_wl), f"{where}.workload"))
    cols.speculate.append(_bool(r.get("speculate", True), f"{where}.speculate"))
    acc = r.get("acceptance")
    cols.acceptance.append(
        math.nan if acc is None else _num(acc, f"{where}.acceptance", 0.0, hi_open=1.0)
    )


def _parse_segment(obj: Any, where: str, default_wl: str) -> SegmentSpec:
    s = _obj(obj, where)
    _check_keys(s, _SEGMENT_KEYS, where)
    for key in ("duration_s", "rate_rps"):
        if key not in s:
            raise NightjarInputError(f"{where}: missing field {key!r}")
    acc = s.get("acceptance")
    mix = _mix(s, where) if "mix" in s else None
    return SegmentSpec(
        duration_s=_num(s["duration_s"], f"{where}.duration_s", 0.0, lo_open=True),
        rate_rps=_num(s["rate_rps"], f"{where}.rate_rps", 0.0),
        burstiness=_num(s.get("burstiness", 1.0), f"{where}.burstiness", MIN_BURSTINESS),
        workload=_workload(s.get("workload", default_wl), f"{where}.workload"),
        prompt_dist=_length(s["prompt_tokens"], f"{where}.prompt_tokens")
        if "prompt_tokens" in s else None,
        output_dist=_length(s["output_tokens"], f"{where}.output_tokens")
        if "output_tokens" in s else None,
        acceptance=None if acc is None else _num(acc, f"{where}.acceptance", 0.0, hi_open=1.0),
        mix=mix,
        speculate=_bool(s.get("speculate", True), f"{where}.speculate"),
    )


def _mix(s: Mapping[str, Any], where: str) -> tuple[tuple[str, float], ...]:
    """``{"sharegpt": 0.8, "longctx": 0.2}``: positive weights, normalised to shares.

    A mix replaces the segment's workload and its length overrides (each request's
    lengths come from its own workload), so naming both is an error, not a silent
    choice of one.
    """
    for key in ("workload", "prompt_tokens", "output_tokens"):
        if key in s:
            raise NightjarInputError(f"{where}: give 'mix' or '{key}', not both")
    m = s["mix"]
    if not isinstance(m, Mapping) or not m:
        raise NightjarInputError(
            f"{where}.mix must be a non-empty object of workload weights "
            f'(e.g. {{"sharegpt": 0.8, "longctx": 0.2}}), got {_short(m)}'
        )
    weights = [
        (_workload(name, f"{where}.mix"), _num(w, f"{where}.mix.{name}", 0.0, lo_open=True))
        for name, w in m.items()
    ]
    total = sum(w for _, w in weights)
    if not math.isfinite(total):
        raise NightjarInputError(f"{where}.mix: the weights' sum overflows")
    return tuple((name, w / total) for name, w in weights)


def parse_trace_json(obj: Any, source: str, default_name: str) -> TraceSpec:
    """Validate a decoded trace JSON document; ``source`` labels every error."""
    top = _obj(obj, f"{source}: the trace")
    _check_keys(top, _TOP_KEYS, source)
    version = top.get("format_version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise NightjarInputError(
            f"{source}: format_version {version!r} is not supported (this version reads "
            f"{FORMAT_VERSION})"
        )
    has_req, has_seg = "requests" in top, "segments" in top
    if has_req == has_seg:
        raise NightjarInputError(f"{source}: give exactly one of 'requests' and 'segments'")
    key = "requests" if has_req else "segments"
    items = top[key]
    if not isinstance(items, list):
        raise NightjarInputError(f"{source}: '{key}' must be a list")
    if not items:
        raise NightjarInputError(f"{source}: empty trace ('{key}' is an empty list)")
    default_wl = _workload(top.get("workload", DEFAULT_WORKLOAD), f"{source}: workload")
    seed = _int(top.get("seed", 0), f"{source}: seed", 0, MAX_SEED)
    name = _str(top.get("name", default_name), f"{source}: name")
    description = _str(top.get("description", ""), f"{source}: description")
    duration = top.get("duration_s")
    duration_s = None if duration is None else check_arrival(
        _num(duration, f"{source}: duration_s", 0.0), f"{source}: duration_s")
    cap = top.get("max_requests")
    max_requests = None if cap is None else _int(cap, f"{source}: max_requests", 1,
                                                 MAX_EXPECTED_REQUESTS)
    if has_req:
        cols = RequestColumns()
        for i, r in enumerate(items):
            _parse_request(r, f"{source}: requests[{i}]", default_wl, cols)
        if duration_s is not None and duration_s < max(cols.arrival_s):
            raise NightjarInputError(
                f"{source}: duration_s {duration_s} is before the last arrival "
                f"{max(cols.arrival_s)}"
            )
        return TraceSpec(source, name, description, seed, duration_s, cols, None, max_requests)
    if duration_s is not None:
        raise NightjarInputError(
            f"{source}: duration_s is implied by the segments; give it per segment"
        )
    segs = [_parse_segment(s, f"{source}: segments[{i}]", default_wl) for i, s in enumerate(items)]
    check_arrival(sum(s.duration_s for s in segs), f"{source}: the segments' total duration_s")
    expected = sum(s.rate_rps * s.duration_s for s in segs)
    if expected > MAX_EXPECTED_REQUESTS:
        raise NightjarInputError(
            f"{source}: the segments expect {expected:.0f} requests, more than the "
            f"{MAX_EXPECTED_REQUESTS} allowed"
        )
    return TraceSpec(source, name, description, seed, None, None, segs, max_requests)
