"""Writing a profile document (docs/profiles.md): the one place that lays out the JSON.

A writer fills a :class:`ProfileDocument` with typed parts (the memory facts, the
tables' rows in the file's units, acceptance priors, free-form metadata) and
:meth:`ProfileDocument.to_json` lays out the document that
:func:`nightjar.profile.format.parse_profile_dict` reads: every key, where it sits, the
format version. Both writers go through it, the roofline (``nightjar.roofline.costs``)
and the measured profiler (``nightjar.live.profiling.profiler``); a profile measured
later tops its table up with :func:`with_mixed`. Seconds become the file's
milliseconds through :func:`to_ms` alone.

The layout is frozen: a document holds its keys in the order both writers have
always written them, so a profile regenerated from its ``command`` is the same file,
byte for byte (``tests/test_roofline.py``, ``tests/test_profiler_assemble.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from nightjar.core.drafter import DRAFT_MODEL
from nightjar.profile.format import FORMAT_VERSION
from nightjar.profile.profile import MemoryFacts

MS_PER_S = 1e3
# The millisecond columns keep 5 decimals (10 ns), as every bundled file does.
MS_DIGITS = 5


def to_ms(seconds: float) -> float:
    """``seconds`` as a millisecond cell of the file, rounded to :data:`MS_DIGITS`."""
    return round(seconds * MS_PER_S, MS_DIGITS)


# One row of each table, its fields the format's columns (nightjar.profile.format);
# numbers are written as given (a context of 128 stays ``128``, never ``128.0``).
class DecodeRow(NamedTuple):
    batch_size: int
    gamma: int
    context_len: float
    step_ms: float
    draft_ms: float
    verify_ms: float

    @classmethod
    def from_seconds(cls, batch_size: int, gamma: int, context_len: float, step_s: float,
                     draft_s: float, verify_s: float) -> DecodeRow:
        return cls(batch_size, gamma, context_len, to_ms(step_s), to_ms(draft_s),
                   to_ms(verify_s))


class DraftForwardRow(NamedTuple):
    batch_size: int
    context_len: float
    ms: float

    @classmethod
    def from_seconds(cls, batch_size: int, context_len: float, s: float) -> DraftForwardRow:
        return cls(batch_size, context_len, to_ms(s))


class PrefillRow(NamedTuple):
    tokens: int
    target_ms: float
    draft_ms: float

    @classmethod
    def from_seconds(cls, tokens: int, target_s: float, draft_s: float) -> PrefillRow:
        return cls(tokens, to_ms(target_s), to_ms(draft_s))


class MixedRow(NamedTuple):
    batch_size: int
    tokens: int
    added_ms: float


class WakeRow(NamedTuple):
    idle_s: float
    added_ms: float


def _rows(rows: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    return [list(row) for row in rows]


def _memory(m: MemoryFacts) -> dict[str, Any]:
    """The ``memory`` object: every fact in :class:`MemoryFacts`' order, the optional
    pins (``kv_blocks_*``, ``max_model_len``) only where set."""
    return {f.name: getattr(m, f.name) for f in fields(m) if getattr(m, f.name) is not None}


@dataclass(frozen=True, slots=True)
class ProfileDocument:
    """A profile's parts; :meth:`to_json` is the file (``format_version`` 1).

    ``acceptance`` maps a workload to its Beta prior ``(mean, concentration)``.
    ``notes``, ``hardware``, ``roofline`` and ``measured`` are free-form metadata,
    left out when None; ``mixed`` and ``wake`` are left out when empty, ``drafter``
    when it is a draft model (the format's default).
    """

    name: str
    source: str
    command: str
    gpu: str
    target: str
    draft: str
    memory: MemoryFacts
    decode: Sequence[DecodeRow]
    draft_forward: Sequence[DraftForwardRow]
    prefill: Sequence[PrefillRow]
    acceptance: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    mixed: Sequence[MixedRow] = ()
    wake: Sequence[WakeRow] = ()
    drafter: str = DRAFT_MODEL
    notes: str | None = None
    hardware: Mapping[str, Any] | None = None
    roofline: Mapping[str, Any] | None = None
    measured: Mapping[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The document, a new dict (its metadata copied, so a caller may add to it)."""
        out: dict[str, Any] = {
            "format_version": FORMAT_VERSION,
            "name": self.name,
            "source": self.source,
            "command": self.command,
        }
        if self.notes is not None:
            out["notes"] = self.notes
        out.update(gpu=self.gpu, target=self.target, draft=self.draft)
        for key, meta in (("hardware", self.hardware), ("roofline", self.roofline),
                          ("measured", self.measured)):
            if meta is not None:
                out[key] = dict(meta)
        out["memory"] = _memory(self.memory)
        out["decode"] = _rows(self.decode)
        out["draft_forward"] = _rows(self.draft_forward)
        out["prefill"] = _rows(self.prefill)
        if self.mixed:
            out["mixed"] = _rows(self.mixed)
        if self.wake:
            out["wake"] = _rows(self.wake)
        out["acceptance"] = {w: {"mean": mean, "concentration": conc}
                             for w, (mean, conc) in self.acceptance.items()}
        if self.drafter == DRAFT_MODEL:
            return out
        # Where ``drafter`` sits is each writer's since the key was added: a measured
        # profile opens with it, a model's closes with it (files stay byte-identical).
        if self.source == "measured":
            return {"drafter": self.drafter, **out}
        out["drafter"] = self.drafter
        return out


def with_mixed(base: Mapping[str, Any], rows: Sequence[MixedRow], notes: str) -> dict[str, Any]:
    """A copy of the document ``base`` with the mixed-step table ``rows`` (replacing
    any) and ``notes``; keys ``base`` has stay where they are, new ones go last."""
    out = dict(base)
    out["mixed"] = _rows(rows)
    out["notes"] = notes
    return out


def refitted(base: Mapping[str, Any], *, decode: Sequence[DecodeRow] | None = None,
             prefill: Sequence[PrefillRow] | None = None,
             mixed: Sequence[MixedRow] | None = None,
             meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A copy of the document ``base`` with the given tables replaced (a fit's
    corrections: ``nightjar.fidelity.fit``) and the given top-level ``meta`` keys
    (``name``, ``source``, ``command``, ``notes``, ``measured``); keys ``base`` has stay
    where they are, new ones go last."""
    out = dict(base)
    for key, rows in (("decode", decode), ("prefill", prefill), ("mixed", mixed)):
        if rows is not None:
            out[key] = _rows(rows)
    out.update(meta or {})
    return out

