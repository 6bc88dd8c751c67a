"""One cell of a sweep: its parameters, its identity, and the pure function that runs it.

A cell runs anywhere (this process, a local worker, a Ray node) from its parameters
and the texts of its trace and profile, which the driver reads once and ships along:
a remote node needs no access to the driver's files. The result is deterministic in
those inputs, so local and Ray sweeps give the same numbers.

Seeds: seed ``k`` runs the simulator with seed ``k`` and re-draws a generative
trace's arrivals and lengths with the file's seed plus ``k`` (so seed 0 is exactly
the trace ``nightjar sim`` runs). An explicit trace (fixed requests) keeps its
requests; only the simulator's draws change.

Rate scale: ``s`` multiplies the request rate (``Trace.rate_scaled``: every arrival
time and the trace's span divided by ``s``), the same requests arriving ``s`` times as
fast, so a load-latency curve compares like for like; ``nightjar sim --rate-scale``
means the same.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from nightjar.results.provenance import RUN_KEYS
from nightjar.run.config import AXIS, SCALAR, RunConfig

# Part of every cell's identity: a new release may give new numbers.
_VERSION = version("nightjar")
# Parsed traces and profiles per worker process, keyed by the digest of their text.
_CACHE: dict[tuple[str, str, int], Any] = {}


# The sweep table's column for a setting it spelled otherwise before the settings had
# one name; kept, so that a sweep folder written before resumes cell for cell (a cell's
# key hashes its parameters) and readers of the table find their column.
COLUMN = {"acceptance": "acceptance_model"}
_HEAD = ("trace", "rate_scale", "seed", "policy", "profile")


@dataclass(frozen=True)
class Cell:
    """One point of the grid: a trace, a profile, and the run's settings (one policy, the
    cell's seed and rate scale, no oracle: a cell's regret needs none)."""

    trace: str  # bundled name or path, as the user gave it
    profile: str
    settings: RunConfig  # as the grid gave them; run_config() checks them

    @property
    def policy(self) -> str:
        return self.settings.policies[0]

    @property
    def seed(self) -> int:
        return self.settings.seed

    @staticmethod
    def columns() -> list[str]:
        """The names of :meth:`params`: the trace, the rate scale, seed, policy and
        profile, then every setting a sweep varies or fixes, in the settings' order."""
        swept = [name for role in (AXIS, SCALAR) for name in RunConfig.fields_swept(role)]
        return [*_HEAD, *(COLUMN.get(name, name) for name in swept)]

    def params(self) -> dict[str, Any]:
        """The cell's parameters (:meth:`columns`), the sweep table's leading columns."""
        s = self.settings
        head = (self.trace, s.rate_scale, s.seed, self.policy, self.profile)
        swept = [getattr(s, name) for role in (AXIS, SCALAR)
                 for name in RunConfig.fields_swept(role)]
        return dict(zip(self.columns(), [*head, *swept], strict=True))

    def run_config(self) -> RunConfig:
        """The cell's settings, checked (a cell's own bad value is a one-line error
        naming the flag, which a sweep spells as ``nightjar sim`` does)."""
        from nightjar.run.config import flag_of

        return RunConfig.build(self.settings.values(), spell=flag_of)

    def key(self, trace_digest: str, profile_digest: str) -> str:
        """The cell's identity: its parameters, the exact trace and profile contents,
        and the nightjar version (a new simulator may give new numbers)."""
        ident = {**self.params(), "trace_sha": trace_digest, "profile_sha": profile_digest,
                 "version": _VERSION}
        blob = json.dumps(ident, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:20]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class CellTask:
    """What a worker needs: the cell, its key, its inputs' texts, and the command that
    asked for it (recorded in its row; not part of its identity)."""

    cell: Cell
    key: str
    trace_text: str
    profile_text: str
    command: str = ""


def _trace(text: str, label: str, seed_offset: int) -> Any:
    from nightjar.trace.schema import parse_trace_json
    from nightjar.trace.trace import materialize

    cache_key = ("trace", digest(text), seed_offset)
    if cache_key not in _CACHE:
        spec = parse_trace_json(json.loads(text), label, label)
        _CACHE[cache_key] = materialize(spec, spec.seed + seed_offset)
    return _CACHE[cache_key]


def _profile(text: str, label: str) -> Any:
    from nightjar.profile.profile import Profile

    cache_key = ("profile", digest(text), 0)
    if cache_key not in _CACHE:
        _CACHE[cache_key] = Profile.from_json(json.loads(text), label)
    return _CACHE[cache_key]


def run_cell(task: CellTask) -> dict[str, Any]:
    """Simulate one cell and return its table row (cell parameters + every summary column)."""
    from nightjar.results.metrics import summarize
    from nightjar.results.regret import bound_regret_pct
    from nightjar.run.prepare import prepare

    cell = task.cell
    trace = _trace(task.trace_text, cell.trace, cell.seed)
    run = prepare(cell.run_config(), trace, _profile(task.profile_text, cell.profile),
                  checked=True)
    config, trace = run.config, run.trace
    (result,) = run.simulate()
    summary = summarize(result, config.slo()).as_dict()
    summary.pop("policy")
    summary.pop("engine")
    trace_name = summary.pop("trace")
    # The SLO limits come with the summary (slo_ttft_s, slo_tpot_s), not twice.
    params = {k: v for k, v in cell.params().items() if k not in ("slo_ttft", "slo_tpot")}
    # A trace whose requests all arrive at once has no rate (NaN: empty in the table).
    span = trace.duration_s
    row: dict[str, Any] = {"cell": task.key, **params, "trace_name": trace_name,
                           "rate_rps": len(trace) / span if span > 0 else math.nan}
    for key, value in summary.items():
        row[key if key not in row else f"summary_{key}"] = value
    # Every cell computes its own bound (nightjar.sim.yardstick): regret needs no oracle.
    row["regret_bound_pct"] = bound_regret_pct(result)
    # What the cell was beyond its parameters (nightjar.results.provenance): its inputs
    # by hash, the acceptance it assumed, the build that computed it, and the command
    # (the sweep's, not a Ray worker's).
    for key in RUN_KEYS:
        row[key] = result.provenance.get(key)
    if task.command:
        row["command"] = task.command
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in row.items()}


def attempt(task: CellTask) -> tuple[dict[str, Any] | None, str | None]:
    """(row, None), or (None, a one-line reason) when the cell fails: one failing cell
    (a policy bug, a batch the profile cannot price) must not take the others down."""
    try:
        return run_cell(task), None
    except Exception as exc:
        from nightjar.errors import NightjarInputError

        text = str(exc) if isinstance(exc, NightjarInputError) else f"{type(exc).__name__}: {exc}"
        return None, (text.strip().splitlines() or [type(exc).__name__])[0]
