"""Request traces: the in-memory model, JSON loading/validation and generation.

A trace file holds either explicit ``requests`` or generative ``segments``
(piecewise-constant rate, gamma-distributed inter-arrival times); the format is
specified in docs/traces.md. Loading always yields a fully materialized
:class:`Trace`, deterministic for a given seed.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import numpy as np

from nightjar.errors import NightjarInputError
from nightjar.reading import as_path, loads_json, read_text
from nightjar.trace.schema import (
    FORMAT_VERSION,
    MAX_ARRIVAL_S,
    SegmentSpec,
    TraceSpec,
    check_arrival,
    check_seed,
    parse_trace_json,
)
from nightjar.trace.sniff import import_hint
from nightjar.trace.workloads import MAX_TOKENS, get_workload

Prompt = str | list[int] | None


@dataclass(frozen=True)
class Trace:
    """A materialized trace: one entry per request in every array, in arrival order.

    Invariants (checked at construction): all arrays have the same length >= 1;
    ``arrival_s`` is float64, finite, >= 0 and non-decreasing; token counts are int64
    in ``1..MAX_TOKENS``;
    ``acceptance`` is NaN (engine draws from the workload) or in [0, 1).
    """

    name: str
    seed: int
    arrival_s: np.ndarray
    prompt_tokens: np.ndarray
    output_tokens: np.ndarray
    workload: np.ndarray
    acceptance: np.ndarray
    prompts: list[Prompt] | None = None
    description: str = ""
    # The span the trace covers; for generative traces the segments' total
    # duration, which may exceed the last arrival. None means "last arrival".
    span_s: float | None = None
    # Per request, whether it may be speculated (bool); None means every request may.
    speculate: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name in ("arrival_s", "prompt_tokens", "output_tokens", "workload", "acceptance"):
            if not isinstance(getattr(self, name), np.ndarray):
                raise NightjarInputError(
                    f"Trace.{name} must be a numpy array (build traces with "
                    "Trace.from_requests or Trace.from_segments)")
        n = len(self.arrival_s)
        arrays = (self.prompt_tokens, self.output_tokens, self.workload, self.acceptance)
        if n == 0 or any(len(a) != n for a in arrays):
            raise NightjarInputError("trace arrays must be non-empty and of equal length")
        if self.prompts is not None and len(self.prompts) != n:
            raise NightjarInputError("trace prompts must have one entry per request")
        if self.speculate is not None and len(self.speculate) != n:
            raise NightjarInputError("trace speculate flags must have one entry per request")
        if not np.isfinite(self.arrival_s).all():
            raise NightjarInputError("trace arrivals must be finite")
        if self.arrival_s[0] < 0 or np.any(np.diff(self.arrival_s) < 0):
            raise NightjarInputError("trace arrivals must be >= 0 and non-decreasing")
        check_arrival(float(max(self.arrival_s[-1], self.span_s or 0.0)),
                      f"trace {self.name!r}: the last arrival")
        if self.prompt_tokens.min() < 1 or self.output_tokens.min() < 1:
            raise NightjarInputError("trace token counts must be >= 1")
        if self.prompt_tokens.max() > MAX_TOKENS or self.output_tokens.max() > MAX_TOKENS:
            raise NightjarInputError(f"trace token counts must be <= {MAX_TOKENS}")
        acc = self.acceptance[~np.isnan(self.acceptance)]
        if acc.size and (acc.min() < 0 or acc.max() >= 1):
            raise NightjarInputError("trace acceptance must be NaN or in [0, 1)")

    def __len__(self) -> int:
        return len(self.arrival_s)

    @property
    def duration_s(self) -> float:
        last = float(self.arrival_s[-1])
        return last if self.span_s is None else max(last, self.span_s)

    def rate_scaled(self, scale: float) -> Trace:
        """The same requests arriving ``scale`` times as fast: every arrival time and
        the span divided by ``scale`` (``--rate-scale``: 2 doubles the request rate)."""
        if isinstance(scale, bool) or not isinstance(scale, int | float) or not (
            math.isfinite(scale) and scale > 0
        ):
            raise NightjarInputError(f"rate scale must be a finite number > 0, got {scale!r}")
        if scale == 1.0:
            return self
        # Checked before dividing: a tiny scale overflows to inf (and numpy warns).
        if self.duration_s / scale > MAX_ARRIVAL_S:
            raise NightjarInputError(
                f"rate scale {scale:g} stretches the trace past {MAX_ARRIVAL_S:.0e} s "
                "(3 years)")
        span = None if self.span_s is None else self.span_s / scale
        return dataclasses.replace(self, arrival_s=self.arrival_s / scale, span_s=span)

    def scale_for_rate(self, request_rate: float) -> float:
        """The rate scale that gives this trace a mean rate (requests over its span) of
        ``request_rate`` req/s (``--request-rate``)."""
        if isinstance(request_rate, bool) or not isinstance(request_rate, int | float) or not (
            math.isfinite(request_rate) and request_rate > 0
        ):
            raise NightjarInputError(
                f"--request-rate must be a finite number of requests per second > 0, got"
                f" {request_rate!r}")
        span = self.duration_s
        if not span > 0:
            raise NightjarInputError(
                f"--request-rate: trace {self.name} spans no time (every request arrives at"
                " once), so it has no rate to scale; use --rate-scale")
        return float(request_rate) / (len(self) / span)

    def gamma_arrivals(self, shape: float, seed: int) -> Trace:
        """The same requests, in order, at the trace's mean rate (``n / duration_s``,
        what ``--request-rate`` sets) with arrival gaps drawn from a gamma distribution
        of ``shape``, as ``vllm bench serve --burstiness`` draws them: the first request
        at 0, 1 is Poisson, below 1 burstier, above 1 steadier."""
        n = len(self)
        if n < 2 or not self.duration_s > 0:
            raise NightjarInputError(
                f"--burstiness: trace {self.name} has no arrival rate to keep (fewer than"
                " two requests, or all at one time)")
        mean_gap = self.duration_s / n
        # A generator of its own (the seed and a tag): the acceptance draws keep theirs.
        rng = np.random.default_rng([int(seed), 0x6275727374])
        gaps = rng.gamma(shape, mean_gap / shape, size=n - 1)
        times = np.concatenate(([0.0], np.cumsum(gaps)))
        if float(times[-1]) > MAX_ARRIVAL_S:
            raise NightjarInputError(
                f"--burstiness {shape:g} stretches trace {self.name} past {MAX_ARRIVAL_S:.0e} s")
        return dataclasses.replace(self, arrival_s=times, span_s=None)

    def head(self, n: int) -> Trace:
        """The first ``n`` requests (all when there are fewer); the trace then ends at
        its last kept arrival."""
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise NightjarInputError(f"Trace.head needs a whole count >= 1, got {n!r}")
        if n >= len(self):
            return self
        cut = slice(0, int(n))
        return dataclasses.replace(
            self,
            arrival_s=self.arrival_s[cut], prompt_tokens=self.prompt_tokens[cut],
            output_tokens=self.output_tokens[cut], workload=self.workload[cut],
            acceptance=self.acceptance[cut],
            prompts=None if self.prompts is None else self.prompts[cut],
            span_s=None, speculate=None if self.speculate is None else self.speculate[cut],
        )

    @classmethod
    def from_segments(
        cls,
        segments: Sequence[Mapping[str, Any] | Sequence[float]],
        *,
        name: str = "trace",
        seed: int = 0,
        workload: str = "sharegpt",
        description: str = "",
    ) -> Trace:
        """A generative trace built in memory, validated like a trace file.

        Each segment is ``(rate_rps, duration_s[, burstiness])`` or a dict with the
        file format's segment fields (``rate_rps``, ``duration_s``, ``burstiness``,
        ``workload``, ``prompt_tokens``, ``output_tokens``, ``acceptance``).
        """
        if not isinstance(segments, list | tuple):
            raise NightjarInputError(
                f"segments must be a list of (rate_rps, duration_s[, burstiness]) or dicts,"
                f" got {type(segments).__name__}")
        segs = [dict(s) if isinstance(s, Mapping) else _segment_tuple(s, k)
                for k, s in enumerate(segments)]
        doc = {"name": name, "seed": seed, "workload": workload, "description": description,
               "segments": segs}
        return materialize(parse_trace_json(doc, f"trace {name!r}", name))

    @classmethod
    def from_requests(
        cls,
        requests: Any,
        *,
        name: str = "trace",
        seed: int = 0,
        workload: str = "sharegpt",
        description: str = "",
    ) -> Trace:
        """An explicit trace built in memory from request dicts or a DataFrame whose
        columns are the file format's request fields (``arrival_s``, ``prompt_tokens``,
        ``output_tokens``, optional ``workload``, ``acceptance``, ``prompt``)."""
        if hasattr(requests, "to_dict") and hasattr(requests, "columns"):  # a DataFrame
            requests = requests.to_dict("records")
        if not isinstance(requests, list | tuple) or not all(
                isinstance(r, Mapping) for r in requests):
            raise NightjarInputError(
                "requests must be a list of request dicts or a DataFrame, got "
                f"{type(requests).__name__}"
                + ("" if not isinstance(requests, list | tuple) else " of non-dicts"))
        rows = [{k: _plain(v) for k, v in dict(r).items() if not _missing(v)} for r in requests]
        doc = {"name": name, "seed": seed, "workload": workload, "description": description,
               "requests": rows}
        return materialize(parse_trace_json(doc, f"trace {name!r}", name))


def _segment_tuple(seg: Sequence[float], k: int) -> dict[str, Any]:
    if isinstance(seg, str | bytes) or not isinstance(seg, Sequence) or len(seg) not in (2, 3):
        raise NightjarInputError(
            f"segment {k}: expected (rate_rps, duration_s[, burstiness]) or a dict, got {seg!r}"
        )
    out: dict[str, Any] = {"rate_rps": seg[0], "duration_s": seg[1]}
    if len(seg) == 3:
        out["burstiness"] = seg[2]
    return out


def _plain(v: Any) -> Any:
    """numpy scalars -> Python numbers, so the JSON validator accepts DataFrame rows."""
    return v.item() if isinstance(v, np.generic) else v


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _segment_arrivals(rng: np.random.Generator, seg: SegmentSpec, t0: float) -> np.ndarray:
    """Arrival times in ``[t0, t0 + duration)`` from a gamma renewal process.

    Gamma(shape=k, scale=1/(rate k)) gaps keep the mean rate while the CV of the
    gaps is 1/sqrt(k): k = 1 is Poisson, k < 1 burstier, k > 1 smoother.
    """
    if seg.rate_rps == 0:
        return np.empty(0)
    k = seg.burstiness
    expected = seg.rate_rps * seg.duration_s
    gaps = np.empty(0)
    # Draw in chunks until the cumulative time passes the segment end; the chunk
    # size covers the expected count with a wide margin so one draw usually suffices.
    while gaps.sum() < seg.duration_s:
        chunk = int(expected + 6 * math.sqrt(expected / k) + 16)
        gaps = np.concatenate([gaps, rng.gamma(k, 1.0 / (seg.rate_rps * k), size=chunk)])
    t = np.cumsum(gaps)
    return t0 + t[t < seg.duration_s]


def _flags(speculate: np.ndarray) -> np.ndarray | None:
    """The per-request opt-out column, or None when no request opts out."""
    return None if speculate.all() else speculate


def _mixed_lengths(
    mix: tuple[tuple[str, float], ...],
    n: int,
    pick_rng: np.random.Generator,
    len_rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each arrival's workload drawn by the mix's shares (its own stream), then each
    workload's lengths for its requests, in the mix's order."""
    names = [name for name, _ in mix]
    which = pick_rng.choice(len(mix), size=n, p=[share for _, share in mix])
    prompt = np.zeros(n, dtype=np.int64)
    output = np.zeros(n, dtype=np.int64)
    for j, name in enumerate(names):
        rows = which == j
        wl = get_workload(name)
        prompt[rows] = wl.prompt.sample(len_rng, int(rows.sum()))
        output[rows] = wl.output.sample(len_rng, int(rows.sum()))
    return prompt, output, np.asarray(names, dtype=object)[which]


def materialize(spec: TraceSpec, seed: int | None = None) -> Trace:
    """Turn a validated spec into a :class:`Trace` (generating arrivals if needed),
    cut to its ``max_requests`` first requests when it has one."""
    trace = _materialize(spec, seed)
    return trace if spec.max_requests is None else trace.head(spec.max_requests)


def _materialize(spec: TraceSpec, seed: int | None) -> Trace:
    seed = spec.seed if seed is None else check_seed(seed)
    if spec.requests is not None:
        r = spec.requests
        # Stable sort: requests with equal arrival keep their file order.
        order = np.argsort(np.asarray(r.arrival_s, dtype=np.float64), kind="stable")
        prompts = [r.prompts[i] for i in order] if any(p is not None for p in r.prompts) else None
        return Trace(
            name=spec.name,
            seed=seed,
            arrival_s=np.asarray(r.arrival_s, dtype=np.float64)[order],
            prompt_tokens=np.asarray(r.prompt_tokens, dtype=np.int64)[order],
            output_tokens=np.asarray(r.output_tokens, dtype=np.int64)[order],
            workload=np.asarray(r.workload, dtype=object)[order],
            acceptance=np.asarray(r.acceptance, dtype=np.float64)[order],
            prompts=prompts,
            description=spec.description,
            span_s=spec.duration_s,
            speculate=_flags(np.asarray(r.speculate, dtype=bool)[order]),
        )
    assert spec.segments is not None  # the schema guarantees exactly one of the two
    parts: list[tuple[np.ndarray, ...]] = []
    t0 = 0.0
    for k, seg in enumerate(spec.segments):
        # Independent streams per segment and per purpose, so editing one segment
        # leaves the others' requests unchanged.
        arr = _segment_arrivals(np.random.default_rng([seed, k, 0]), seg, t0)
        n = len(arr)
        len_rng = np.random.default_rng([seed, k, 1])
        if seg.mix is None:
            wl = get_workload(seg.workload)
            prompt_len = (seg.prompt_dist or wl.prompt).sample(len_rng, n)
            output_len = (seg.output_dist or wl.output).sample(len_rng, n)
            names = np.full(n, seg.workload, dtype=object)
        else:
            prompt_len, output_len, names = _mixed_lengths(
                seg.mix, n, np.random.default_rng([seed, k, 2]), len_rng
            )
        acc = np.full(n, np.nan if seg.acceptance is None else seg.acceptance)
        parts.append((arr, prompt_len, output_len, names, acc, np.full(n, seg.speculate)))
        t0 += seg.duration_s
    cols = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    if len(cols[0]) == 0:
        raise NightjarInputError(f"{spec.source}: the segments generate no requests")
    return Trace(
        name=spec.name,
        seed=seed,
        arrival_s=cols[0].astype(np.float64),
        prompt_tokens=cols[1].astype(np.int64),
        output_tokens=cols[2].astype(np.int64),
        workload=cols[3],
        acceptance=cols[4].astype(np.float64),
        prompts=None,
        speculate=_flags(cols[5].astype(bool)),
        description=spec.description,
        span_s=t0,
    )


def bundled_traces() -> list[str]:
    """Names of the traces shipped in ``nightjar.trace.bundled`` (without ``.json``)."""
    root = resources.files("nightjar.trace.bundled")
    return sorted(p.name[:-5] for p in root.iterdir() if p.name.endswith(".json"))


def read_trace_source(name_or_path: str | os.PathLike[str]) -> tuple[str, str, str]:
    """(label, text, default name): an existing file wins over a bundled name of the same spelling.

    Anything at the path (a FIFO, a folder, a dangling link) counts as "the user meant
    this file" and is refused for what it is, rather than looked up as a bundled name.
    """
    path = as_path(name_or_path, "trace")
    name = str(path) if not isinstance(name_or_path, str) else name_or_path
    if os.path.lexists(path):
        return str(path), read_text(path, f"trace {path}"), path.stem
    stem = name[:-5] if name.endswith(".json") else name
    if stem in bundled_traces():
        res = resources.files("nightjar.trace.bundled").joinpath(f"{stem}.json")
        return f"{stem}.json (bundled)", res.read_text(encoding="utf-8"), stem
    if os.sep in name or name.endswith(".json"):
        raise NightjarInputError(f"trace {name}: no such file")
    raise NightjarInputError(
        f"trace {name!r} not found: not a file and not a bundled trace "
        f"(bundled: {', '.join(bundled_traces()) or 'none'})"
    )


def load_trace(name_or_path: str | os.PathLike[str], seed: int | None = None) -> Trace:
    """Load a bundled trace by name (``burst`` or ``burst.json``), a JSON file or a
    parquet trace (:mod:`nightjar.trace.columnar`).

    Generative traces are materialized with the file's ``seed`` unless ``seed``
    overrides it; explicit traces take ``seed`` only as their recorded seed.
    """
    from nightjar.trace.columnar import is_parquet, read_trace_parquet

    if seed is not None:
        check_seed(seed)
    path = as_path(name_or_path, "trace")
    if is_parquet(path):
        return Trace(**read_trace_parquet(path, seed))
    label, text, default_name = read_trace_source(name_or_path)
    hint = import_hint(label, text)
    if hint is not None:
        raise NightjarInputError(hint)
    obj = loads_json(text, label)
    return materialize(parse_trace_json(obj, label, default_name), seed)


def trace_to_json(trace: Trace) -> dict[str, Any]:
    """The explicit (``requests``) JSON form of a trace; loads back to an equal trace
    (arrival times are rounded to the microsecond)."""
    requests: list[dict[str, Any]] = []
    for i in range(len(trace)):
        req: dict[str, Any] = {
            "arrival_s": round(float(trace.arrival_s[i]), 6),
            "prompt_tokens": int(trace.prompt_tokens[i]),
            "output_tokens": int(trace.output_tokens[i]),
            "workload": str(trace.workload[i]),
        }
        if not math.isnan(trace.acceptance[i]):
            req["acceptance"] = float(trace.acceptance[i])
        if trace.speculate is not None and not trace.speculate[i]:
            req["speculate"] = False
        p = trace.prompts[i] if trace.prompts is not None else None
        if isinstance(p, str):
            req["prompt"] = p
        elif p is not None:
            req["prompt_token_ids"] = [int(t) for t in p]
        requests.append(req)
    return {
        "format_version": FORMAT_VERSION,
        "name": trace.name,
        "description": trace.description,
        "seed": trace.seed,
        "duration_s": round(trace.duration_s, 6),
        "requests": requests,
    }


# More windows than this is a typo in --window, and would allocate a count per window.
MAX_WINDOWS = 1_000_000


def arrival_rates(trace: Trace, window_s: float) -> np.ndarray:
    """Requests per second in consecutive windows of ``window_s`` over the trace span."""
    if not (math.isfinite(window_s) and window_s > 0):  # also refuses NaN
        raise NightjarInputError(f"window must be a finite number > 0 seconds (got {window_s})")
    spans = trace.duration_s / window_s
    if spans > MAX_WINDOWS:
        raise NightjarInputError(
            f"window {window_s:g} s cuts the {trace.duration_s:g} s trace into more than "
            f"{MAX_WINDOWS} windows"
        )
    n_win = max(1, math.ceil(spans))
    counts = np.bincount(
        np.minimum((trace.arrival_s // window_s).astype(np.int64), n_win - 1), minlength=n_win
    )
    return counts / window_s


def interarrival_cv(trace: Trace) -> float:
    """Coefficient of variation of the gaps between arrivals (1 for Poisson; NaN if < 2
    gaps). Mixing segments of different rates raises it, so compare per segment."""
    gaps = np.diff(trace.arrival_s)
    if gaps.size < 2 or gaps.mean() == 0:
        return math.nan
    return float(gaps.std() / gaps.mean())
