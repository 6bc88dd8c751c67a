"""Validation of the profile JSON format (docs/profiles.md), one field at a time.

Every problem raises NightjarInputError naming the file and the field, on one line.
The result is plain typed data; nightjar.profile.profile builds the lookup tables from it.
"""

from __future__ import annotations

import difflib
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nightjar.core.drafter import DRAFT_MODEL, DRAFTERS
from nightjar.errors import NightjarInputError

# The one version of the format this nightjar reads and writes (docs/profiles.md).
FORMAT_VERSION = 1
# "roofline": the uncalibrated model of earlier releases, still accepted.
SOURCES = ("measured", "calibrated-roofline", "roofline")
MEMORY_INT_FIELDS = (
    "device_bytes",
    "target_weight_bytes",
    "draft_weight_bytes",
    "activation_reserve_bytes",
    "target_kv_bytes_per_token",
    "draft_kv_bytes_per_token",
    "block_size",
)
MEMORY_OPTIONAL_INT_FIELDS = ("kv_blocks_with_draft", "kv_blocks_without_draft", "max_model_len")
MEMORY_FLOAT_FIELDS = (
    "gpu_memory_utilization",
    "host_link_bytes_per_s",
    "device_bandwidth_bytes_per_s",
)
# Every key the format knows; anything else is a typo and is refused, as in traces.
# ``notes``, ``hardware``, ``roofline`` and ``measured`` hold free-form metadata.
TOP_KEYS = frozenset({
    "$schema",  # where an editor finds the JSON Schema (nightjar.schemas); ignored
    "format_version", "name", "source", "command", "notes", "gpu", "target", "draft",
    "hardware", "roofline", "measured", "memory", "decode", "draft_forward", "prefill",
    "mixed", "wake", "acceptance", "drafter",
})
ACCEPTANCE_KEYS = frozenset({"mean", "concentration"})
DECODE_COLUMNS = ("batch_size", "gamma", "context_len", "step_ms", "draft_ms", "verify_ms")
DRAFT_FORWARD_COLUMNS = ("batch_size", "context_len", "ms")
PREFILL_COLUMNS = ("tokens", "target_ms", "draft_ms")
MIXED_COLUMNS = ("batch_size", "tokens", "added_ms")
WAKE_COLUMNS = ("idle_s", "added_ms")
# An idle time past an hour is no engine's pause between requests: a unit mix-up.
MAX_IDLE_S = 3600.0


@dataclass
class ParsedProfile:
    name: str
    source: str
    command: str
    gpu: str
    target: str
    draft: str
    memory: dict[str, Any]
    batch_sizes: list[int]
    gammas: list[int]
    context_lens: list[float]
    # decode[k][gamma][batch] = seconds over context_lens; k = 0 step, 1 draft, 2 verify.
    decode: list[dict[int, dict[int, list[float]]]]
    draft_forward: dict[int, list[float]]
    prefill_tokens: list[int]
    prefill_target_s: list[float]
    prefill_draft_s: list[float]
    acceptance: dict[str, tuple[float, float]]
    # Optional (measured profiles): mixed[batch] = seconds n prompt tokens add to a
    # decode step of that batch, over mixed_tokens. Empty when the profile has none.
    mixed_batch_sizes: list[int] = field(default_factory=list)
    mixed_tokens: list[int] = field(default_factory=list)
    mixed_added_s: dict[int, list[float]] = field(default_factory=dict)
    # Optional (measured profiles): what the first step after an idle engine adds, by
    # the seconds it was idle: (idle_s, added_s) rows, sorted. Empty when absent.
    wake: list[tuple[float, float]] = field(default_factory=list)
    # The drafter's kind (nightjar.core.drafter); absent in a file means a draft model.
    drafter: str = DRAFT_MODEL


# Larger values are typos (and would overflow int64 arithmetic downstream).
MAX_NUMBER = 2**62
# Physical sense (docs/profiles.md). No step of any engine on any hardware lasts less
# than a microsecond (a kernel launch costs several) or more than an hour, and no engine
# runs more than 65536 requests in one batch; a table outside these is a unit mix-up or a
# typo, and would make the simulator divide by zero or price a run at 0 tok/s.
MIN_MS = 1e-3
MAX_MS = 3.6e6
MAX_BATCH_SIZE = 2**16
MAX_CONTEXT = 2**40
# A host link or device slower than 1 MB/s is no accelerator's: a unit mix-up.
MIN_BYTES_PER_S = 1e6
MAX_CONCENTRATION = 1e6
# Rounding of the millisecond columns (bundled files keep 5 decimals).
ROUNDING_MS = 1e-4
MODEL_SOURCES = ("calibrated-roofline", "roofline")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


class _Reader:
    def __init__(self, src: str) -> None:
        self.src = src

    def fail(self, field: str, problem: str) -> NightjarInputError:
        return NightjarInputError(f"profile {self.src}: field {field!r} {problem}")

    def known(self, d: dict[str, Any], allowed: Iterable[str], where: str = "") -> None:
        """Refuse a key the format does not know, suggesting the nearest one."""
        names = sorted(allowed)
        for key in d:
            if key not in names:
                near = difflib.get_close_matches(str(key), names, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                raise self.fail(f"{where}{key}", f"is not a profile field{hint}")

    def get(self, d: dict[str, Any], key: str, where: str = "") -> Any:
        field = f"{where}{key}"
        if key not in d:
            raise self.fail(field, "is missing")
        return d[key]

    def text(self, d: dict[str, Any], key: str) -> str:
        v = self.get(d, key)
        if not isinstance(v, str) or not v:
            raise self.fail(key, f"must be a non-empty string, got {v!r}")
        return v

    def number(self, v: Any, field: str, *, integer: bool = False, positive: bool = False) -> Any:
        ok = isinstance(v, int) if integer else isinstance(v, int | float)
        if isinstance(v, bool) or not ok or not math.isfinite(v) or abs(v) > MAX_NUMBER:
            kind = "an integer" if integer else "a finite number"
            raise self.fail(field, f"must be {kind} below 2**62, got {_short(v)}")
        if v < 0 or (positive and v == 0):
            raise self.fail(field, f"must be {'> 0' if positive else '>= 0'}, got {v!r}")
        return v

    def rows(self, d: dict[str, Any], key: str, columns: tuple[str, ...]) -> list[list[Any]]:
        rows = self.get(d, key)
        if not isinstance(rows, list) or not rows:
            raise self.fail(key, "must be a non-empty list of rows")
        for i, row in enumerate(rows):
            if not isinstance(row, list) or len(row) != len(columns):
                raise self.fail(f"{key}[{i}]", f"must be a row [{', '.join(columns)}]")
            for col, v in zip(columns, row, strict=True):
                integer = col in ("batch_size", "gamma", "tokens")
                self.number(v, f"{key}[{i}].{col}", integer=integer, positive=col == "batch_size")
        return rows


def _memory(r: _Reader, data: dict[str, Any]) -> dict[str, Any]:
    mem = r.get(data, "memory")
    if not isinstance(mem, dict):
        raise r.fail("memory", "must be an object")
    r.known(mem, MEMORY_INT_FIELDS + MEMORY_FLOAT_FIELDS + MEMORY_OPTIONAL_INT_FIELDS, "memory.")
    out: dict[str, Any] = {}
    for key in MEMORY_INT_FIELDS:
        positive = key in ("device_bytes", "block_size", "target_kv_bytes_per_token")
        out[key] = r.number(
            r.get(mem, key, "memory."), f"memory.{key}", integer=True, positive=positive
        )
    for key in MEMORY_FLOAT_FIELDS:
        out[key] = float(r.number(r.get(mem, key, "memory."), f"memory.{key}", positive=True))
    if out["gpu_memory_utilization"] > 1.0:
        raise r.fail("memory.gpu_memory_utilization", "must be in (0, 1]")
    for key in ("host_link_bytes_per_s", "device_bandwidth_bytes_per_s"):
        if out[key] < MIN_BYTES_PER_S:
            raise r.fail(f"memory.{key}", f"is {out[key]:g} B/s, slower than any device's "
                         f"(at least {MIN_BYTES_PER_S:g} B/s: bytes per second, not GB/s?)")
    # Optional pins of a deployment (vLLM's --num-gpu-blocks-override, --max-model-len).
    for key in MEMORY_OPTIONAL_INT_FIELDS:
        if key in mem:
            out[key] = r.number(mem[key], f"memory.{key}", integer=True, positive=True)
    # A pinned pool holds real bytes: no more than the whole device.
    per_block = out["block_size"] * out["target_kv_bytes_per_token"]
    for key, extra in (("kv_blocks_without_draft", 0),
                       ("kv_blocks_with_draft", out["block_size"] *
                        out["draft_kv_bytes_per_token"])):
        if key in out and out[key] * (per_block + extra) > out["device_bytes"]:
            raise r.fail(f"memory.{key}", f"{out[key]} blocks of {per_block + extra} bytes "
                         f"need more than the device's {out['device_bytes']} bytes")
    with_d, without = out.get("kv_blocks_with_draft"), out.get("kv_blocks_without_draft")
    if with_d is not None and without is not None and with_d > without:
        raise r.fail("memory.kv_blocks_with_draft", f"{with_d} is more than "
                     f"kv_blocks_without_draft {without}: a resident draft takes memory, it "
                     "cannot make the KV pool larger")
    return out


def _grid(r: _Reader, rows: list[list[Any]]) -> tuple[list[int], list[int], list[float]]:
    """The decode table must be a full grid with gammas 0..gamma_max."""
    bs = sorted({int(row[0]) for row in rows})
    gs = sorted({int(row[1]) for row in rows})
    cs = sorted({float(row[2]) for row in rows})
    if gs != list(range(len(gs))):
        raise r.fail("decode", f"gammas must be 0..gamma_max without gaps, got {gs}")
    seen = {(int(row[0]), int(row[1]), float(row[2])) for row in rows}
    if len(seen) != len(rows):
        raise r.fail("decode", "has duplicate (batch_size, gamma, context_len) rows")
    if len(rows) != len(bs) * len(gs) * len(cs):
        missing = next((b, g, c) for b in bs for g in gs for c in cs if (b, g, c) not in seen)
        raise r.fail("decode", f"is not a full grid: no row for (B, gamma, context) = {missing}")
    return bs, gs, cs


def _acceptance(r: _Reader, data: dict[str, Any]) -> dict[str, tuple[float, float]]:
    acc = data.get("acceptance", {})
    if not isinstance(acc, dict):
        raise r.fail("acceptance", "must be an object keyed by workload name")
    out: dict[str, tuple[float, float]] = {}
    for workload, entry in acc.items():
        where = f"acceptance.{workload}."
        if not isinstance(entry, dict):
            raise r.fail(f"acceptance.{workload}", "must be {mean, concentration}")
        r.known(entry, ACCEPTANCE_KEYS, where)
        mean = float(r.number(r.get(entry, "mean", where), where + "mean", positive=True))
        if mean >= 1.0:
            raise r.fail(where + "mean", f"must be in (0, 1), got {mean}")
        conc = r.number(
            r.get(entry, "concentration", where), where + "concentration", positive=True
        )
        if conc > MAX_CONCENTRATION:
            raise r.fail(where + "concentration", f"must be <= {MAX_CONCENTRATION:g} "
                         f"(a Beta prior's a + b), got {conc:g}")
        out[workload] = (mean, float(conc))
    return out


def _mixed(r: _Reader, data: dict[str, Any]) -> tuple[list[int], list[int], dict[int, list[float]]]:
    """The optional mixed-step table: a full (batch_size, tokens) grid."""
    if "mixed" not in data:
        return [], [], {}
    rows = r.rows(data, "mixed", MIXED_COLUMNS)
    bs = sorted({int(row[0]) for row in rows})
    ts = sorted({int(row[1]) for row in rows})
    if ts[0] < 1:
        raise r.fail("mixed", "token counts must be >= 1")
    cells = {(int(row[0]), int(row[1])): row[2] / 1e3 for row in rows}
    if len(cells) != len(rows) or len(rows) != len(bs) * len(ts):
        raise r.fail("mixed", "must be a full (batch_size, tokens) grid without duplicates")
    return bs, ts, {b: [cells[(b, t)] for t in ts] for b in bs}


def _wake(r: _Reader, data: dict[str, Any]) -> list[tuple[float, float]]:
    """The optional wake table: distinct idle times in (0 s, an hour], each with the
    milliseconds (>= 0) the first step after that much idle adds."""
    if "wake" not in data:
        return []
    rows = sorted((float(t), float(ms)) for t, ms in r.rows(data, "wake", WAKE_COLUMNS))
    idle = [t for t, _ in rows]
    if idle[0] <= 0 or idle[-1] > MAX_IDLE_S or len(set(idle)) != len(idle):
        raise r.fail("wake", f"idle times must be distinct, > 0 and at most {MAX_IDLE_S:g} s")
    for i, (_t, ms) in enumerate(rows):
        if ms > MAX_MS:
            raise r.fail(f"wake[{i}].added_ms", f"is {ms:g} ms, more than an hour")
    return [(t, ms / 1e3) for t, ms in rows]


def _drafter(r: _Reader, data: dict[str, Any], memory: dict[str, Any]) -> str:
    """The optional ``drafter`` and what it implies for the memory facts."""
    name = data.get("drafter", DRAFT_MODEL)
    if name not in DRAFTERS:
        raise r.fail("drafter", f"must be one of {', '.join(DRAFTERS)}, got {_short(name)}")
    kind = DRAFTERS[name]
    if not kind.has_kv and memory["draft_kv_bytes_per_token"] != 0:
        raise r.fail("memory.draft_kv_bytes_per_token",
                     f"must be 0 for the {name} drafter (it keeps no KV cache)")
    if not kind.own_weights and not kind.has_kv and memory["draft_weight_bytes"] != 0:
        raise r.fail("memory.draft_weight_bytes", f"must be 0 for the {name} drafter (no weights)")
    return str(name)


def _ms(r: _Reader, v: float, field: str, *, zero: bool = False) -> None:
    """A duration in the range any engine's steps take (see :data:`MIN_MS`)."""
    if zero and v == 0:
        return
    if v < MIN_MS:
        raise r.fail(field, f"is {v:g} ms: no engine step takes less than {MIN_MS:g} ms "
                     "(1 microsecond); times are milliseconds")
    if v > MAX_MS:
        raise r.fail(field, f"is {v:g} ms, more than an hour: times are milliseconds")


def _physics(r: _Reader, source: str, decode: list[list[Any]], fwd: list[list[Any]],
             prefill: list[list[Any]], mixed: list[list[Any]]) -> None:
    """What a table cannot say on any hardware: a step of no time, a step cheaper than
    one of its own parts (or than the sum of its parts, in a model that adds them), a
    gamma-0 step that drafts, a speculative step that does not. Measured noise can make
    a larger batch or gamma cheaper than a smaller one; that is only warned about
    (:mod:`nightjar.profile.check`)."""
    for i, (b, g, c, step, draft, verify) in enumerate(decode):
        where = f"decode[{i}]"
        if b > MAX_BATCH_SIZE:
            raise r.fail(f"{where}.batch_size", f"{b} is more than {MAX_BATCH_SIZE} requests")
        if c > MAX_CONTEXT:
            raise r.fail(f"{where}.context_len", f"{c:g} is more than {MAX_CONTEXT} tokens")
        _ms(r, step, f"{where}.step_ms")
        _ms(r, verify, f"{where}.verify_ms")
        # 0 is allowed at any gamma: a drafter the profiler cannot time (host code such
        # as n-gram lookup) leaves it unmeasured; no price divides by it.
        _ms(r, draft, f"{where}.draft_ms", zero=True)
        if g == 0 and draft > ROUNDING_MS:
            raise r.fail(f"{where}.draft_ms", f"is {draft:g} ms at gamma 0: a step that "
                         "speculates nothing drafts nothing (the draft's forward at gamma 0 "
                         "is the draft_forward table)")
        part = max(draft, verify)
        if step < part - ROUNDING_MS:
            raise r.fail(f"{where}.step_ms", f"{step:g} ms is less than its own "
                         f"{'verify' if verify >= draft else 'draft'}_ms {part:g}: a step "
                         "includes its parts")
        if source in MODEL_SOURCES and step < draft + verify - ROUNDING_MS - 1e-6 * step:
            raise r.fail(f"{where}.step_ms", f"{step:g} ms is less than draft_ms + verify_ms "
                         f"= {draft + verify:g}: a {source} model's step adds its parts")
    for i, (_b, _c, ms) in enumerate(fwd):
        _ms(r, ms, f"draft_forward[{i}].ms", zero=True)
    for i, (tokens, target, draft) in enumerate(prefill):
        if tokens > MAX_CONTEXT:
            raise r.fail(f"prefill[{i}].tokens", f"{tokens} is more than {MAX_CONTEXT}")
        _ms(r, target, f"prefill[{i}].target_ms")
        _ms(r, draft, f"prefill[{i}].draft_ms", zero=True)
    for i, (b, tokens, added) in enumerate(mixed):
        if b > MAX_BATCH_SIZE or tokens > MAX_CONTEXT:
            raise r.fail(f"mixed[{i}]", f"({b}, {tokens}) is beyond {MAX_BATCH_SIZE} "
                         f"requests or {MAX_CONTEXT} tokens")
        _ms(r, added, f"mixed[{i}].added_ms", zero=True)


def parse_profile_dict(data: dict[str, Any], src: str, format_version: int) -> ParsedProfile:
    r = _Reader(src)
    r.known(data, TOP_KEYS)
    version = r.get(data, "format_version")
    if version != format_version:
        raise r.fail("format_version", f"is {version!r}; this nightjar reads {format_version}")
    source = r.text(data, "source")
    if source not in SOURCES:
        raise r.fail("source", f"must be one of {', '.join(SOURCES)}, got {source!r}")
    rows = r.rows(data, "decode", DECODE_COLUMNS)
    _physics(r, source, rows, r.rows(data, "draft_forward", DRAFT_FORWARD_COLUMNS),
             r.rows(data, "prefill", PREFILL_COLUMNS),
             r.rows(data, "mixed", MIXED_COLUMNS) if "mixed" in data else [])
    bs, gs, cs = _grid(r, rows)
    decode: list[dict[int, dict[int, list[float]]]] = [
        {g: {b: [0.0] * len(cs) for b in bs} for g in gs} for _ in range(3)
    ]
    ci = {c: i for i, c in enumerate(cs)}
    for b, g, c, *ms in rows:
        for k in range(3):
            decode[k][int(g)][int(b)][ci[float(c)]] = ms[k] / 1e3
    fwd_rows = r.rows(data, "draft_forward", DRAFT_FORWARD_COLUMNS)
    fwd: dict[int, list[float]] = defaultdict(lambda: [math.nan] * len(cs))
    for b, c, ms in fwd_rows:
        if int(b) not in bs or float(c) not in ci:
            raise r.fail("draft_forward", f"row ({b}, {c}) is off the decode table's grid")
        fwd[int(b)][ci[float(c)]] = ms / 1e3
    if len(fwd) != len(bs) or any(math.isnan(x) for v in fwd.values() for x in v):
        raise r.fail("draft_forward", "must cover every (batch_size, context_len) of decode")
    pf = sorted(r.rows(data, "prefill", PREFILL_COLUMNS))
    tokens = [int(row[0]) for row in pf]
    if len(set(tokens)) != len(tokens) or tokens[0] < 1:
        raise r.fail("prefill", "token counts must be distinct and >= 1")
    mixed = _mixed(r, data)
    memory = _memory(r, data)
    return ParsedProfile(
        name=r.text(data, "name"),
        source=source,
        command=r.text(data, "command"),
        gpu=r.text(data, "gpu"),
        target=r.text(data, "target"),
        draft=r.text(data, "draft"),
        memory=memory,
        batch_sizes=bs,
        gammas=gs,
        context_lens=cs,
        decode=decode,
        draft_forward=dict(fwd),
        prefill_tokens=tokens,
        prefill_target_s=[row[1] / 1e3 for row in pf],
        prefill_draft_s=[row[2] / 1e3 for row in pf],
        acceptance=_acceptance(r, data),
        mixed_batch_sizes=mixed[0],
        mixed_tokens=mixed[1],
        mixed_added_s=mixed[2],
        wake=_wake(r, data),
        drafter=_drafter(r, data, memory),
    )
