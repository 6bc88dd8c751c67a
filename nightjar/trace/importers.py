"""Import external request logs and datasets as explicit traces.

- Azure LLM inference traces (CSV ``TIMESTAMP,ContextTokens,GeneratedTokens``):
  real arrival times and lengths, no prompt text.
- vLLM benchmark-style ShareGPT datasets (JSON list of ``{"conversations": [...]}``):
  real prompt text; lengths estimated from text unless a local tokenizer is given;
  arrivals generated at a chosen rate.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from nightjar.errors import NightjarInputError
from nightjar.reading import check_regular, clean_text, loads_json, read_text
from nightjar.trace.csv_rows import csv_rows
from nightjar.trace.fast_csv import SlowPath, Window, chunks, counts, seconds
from nightjar.trace.schema import MIN_BURSTINESS, check_arrival, check_seed
from nightjar.trace.trace import Prompt, Trace
from nightjar.trace.workloads import MAX_TOKENS, get_workload

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_HUMAN = {"human", "user"}


@dataclass(frozen=True)
class ImportReport:
    """What an import kept and dropped, for the CLI to tell the user."""

    kept: int
    skipped: int
    reason: str  # why rows were skipped ("" if none were)


def _timestamp(text: str, where: str) -> float:
    """Seconds since the epoch from a datetime string, or plain seconds if numeric."""
    try:
        return float(text)
    except ValueError:
        pass
    try:
        # Python 3.11 reads the 7-digit fractions Azure writes (18:15:46.6805900). A
        # time without a zone is UTC: the same instant on every machine.
        stamp = datetime.fromisoformat(text.strip())
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    except (ValueError, OverflowError, OSError):
        raise NightjarInputError(f"{where}: TIMESTAMP {text!r} is not a datetime") from None


def _count(text: str, col: str, where: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise NightjarInputError(f"{where}: {col} {text[:40]!r} is not an integer") from None
    if not 0 <= v <= MAX_TOKENS:
        raise NightjarInputError(f"{where}: {col} must be in 0..{MAX_TOKENS} (got {text[:40]})")
    return v


class TimeWindow:
    """The rows of a time-stamped request log that a slice keeps: those whose time,
    relative to the first row's, lies in ``[start_s, start_s + duration_s)``,
    re-based so ``start_s`` is 0, and at most ``limit`` of them in file order. Rows
    with zero prompt or output tokens cannot be served: they are counted in
    ``zero`` and left out. A row earlier than the first is an input error, since
    the base time would be ambiguous.
    """

    def __init__(self, start_s: float, duration_s: float | None, limit: int | None) -> None:
        self.start_s = start_s
        self.end_s = math.inf if duration_s is None else start_s + duration_s
        self.limit = limit
        self.base: float | None = None
        self.arrival: list[float] = []
        self.prompt: list[int] = []
        self.output: list[int] = []
        self.zero = 0

    def rebase(self, ts: float, where: str, column: str) -> float:
        """The row's time after the first row's."""
        self.base = ts if self.base is None else self.base
        t = ts - self.base
        if t < 0:
            raise NightjarInputError(f"{where}: {column} is earlier than the first row")
        return t

    def take(self, t: float, prompt: int, output: int) -> bool:
        """Keep the row if the slice wants it; True once ``limit`` rows are kept."""
        if not self.start_s <= t < self.end_s:
            return False
        if prompt == 0 or output == 0:
            self.zero += 1
            return False
        self.arrival.append(t - self.start_s)
        self.prompt.append(prompt)
        self.output.append(output)
        return self.limit is not None and len(self.arrival) >= self.limit


def import_azure_csv(
    path: str | Path,
    *,
    limit: int | None = None,
    start_s: float = 0.0,
    duration_s: float | None = None,
    workload: str = "sharegpt",
    name: str | None = None,
) -> tuple[Trace, ImportReport]:
    """Rows whose time (relative to the first data row) lies in
    ``[start_s, start_s + duration_s)``, re-based so ``start_s`` is time 0; then the
    first ``limit`` of them in file order. Rows with zero tokens are skipped (they
    cannot be served); rows earlier than the first row are rejected, since the base
    time would be ambiguous. The file is read in chunks (:mod:`nightjar.trace.fast_csv`):
    memory holds one chunk and the window's rows, whatever the file's size.
    """
    get_workload(workload)
    path = Path(path)
    check_regular(path, f"{path}")
    try:
        arrival, prompt, output, zero, non_finite = _azure_fast(path, start_s, duration_s, limit)
    except SlowPath:
        arrival, prompt, output, zero, non_finite = _azure_rows(path, start_s, duration_s, limit)
    reasons = [f"{n} {why}" for n, why in (
        (zero, "with zero ContextTokens or GeneratedTokens"),
        (non_finite, "with a NaN or infinite TIMESTAMP"),
    ) if n]
    if not arrival and reasons:
        why = "; ".join(reasons)
        raise NightjarInputError(f"{path}: no usable requests to import (skipped {why})")
    trace = _explicit(name or path.stem, arrival, prompt, output, workload, None, path,
                      f"Imported from Azure LLM inference trace {path.name}")
    return trace, ImportReport(len(arrival), zero + non_finite, "; ".join(reasons))


Rows = tuple[list[float], list[int], list[int], int, int]


def _azure_fast(path: Path, start_s: float, duration_s: float | None, limit: int | None
                ) -> Rows:
    end = math.inf if duration_s is None else start_s + duration_s
    window = Window(start_s, end, limit)
    for chunk in chunks(path, AZURE_COLUMNS, text=("TIMESTAMP",)):
        ctx = counts(chunk["ContextTokens"])
        gen = counts(chunk["GeneratedTokens"])
        window.offer(seconds(chunk["TIMESTAMP"]), ctx, gen)
        if window.full:
            break
    kept = window.kept
    return (*kept.columns(), kept.zero, kept.non_finite)


def _azure_rows(path: Path, start_s: float, duration_s: float | None, limit: int | None
                ) -> Rows:
    """The row-by-row reader: the reference, and the one that names a bad line."""
    window = TimeWindow(start_s, duration_s, limit)
    non_finite = 0
    for where, row in csv_rows(path, AZURE_COLUMNS):
        ts = _timestamp(row["TIMESTAMP"], where)
        ctx = _count(row["ContextTokens"], "ContextTokens", where)
        gen = _count(row["GeneratedTokens"], "GeneratedTokens", where)
        if not math.isfinite(ts):  # NaN or Inf: no arrival time, counted
            non_finite += 1
            continue
        if window.take(window.rebase(ts, where, "TIMESTAMP"), ctx, gen):
            break
    return window.arrival, window.prompt, window.output, window.zero, non_finite


def _explicit(name: str, arrival: list[float], prompt: list[int], output: list[int],
              workload: str, prompts: list[Prompt] | None, path: Path, desc: str,
              seed: int = 0) -> Trace:
    if not arrival:
        raise NightjarInputError(f"{path}: no usable requests to import")
    check_arrival(max(arrival), f"{path}: the latest arrival")
    order = np.argsort(np.asarray(arrival), kind="stable")
    n = len(arrival)
    return Trace(
        name=name,
        seed=seed,
        arrival_s=np.asarray(arrival, dtype=np.float64)[order],
        prompt_tokens=np.asarray(prompt, dtype=np.int64)[order],
        output_tokens=np.asarray(output, dtype=np.int64)[order],
        workload=np.full(n, workload, dtype=object),
        acceptance=np.full(n, np.nan),
        prompts=None if prompts is None else [prompts[i] for i in order],
        description=desc,
    )


def renewal_arrivals(n: int, rate_rps: float, burstiness: float, seed: int) -> list[float]:
    """``n`` arrival times of a gamma renewal process at ``rate_rps`` (shape
    ``burstiness``: 1 Poisson, < 1 burstier), the first at time 0; ``inf`` sends all
    at time 0, as vLLM's benchmark does by default."""
    check_seed(seed)
    if not (rate_rps > 0) or not (MIN_BURSTINESS <= burstiness < math.inf):
        raise NightjarInputError(
            f"--rate must be > 0 (or inf) and --burstiness a finite number >= {MIN_BURSTINESS}"
        )
    if math.isinf(rate_rps):
        return [0.0] * n
    rng = np.random.default_rng([seed, 0, 0])
    gaps = rng.gamma(burstiness, 1.0 / (rate_rps * burstiness), size=max(n - 1, 0))
    out: list[float] = np.concatenate([[0.0], np.cumsum(gaps)]).tolist()[:n]
    return out


def estimate_tokens(text: str) -> int:
    """A tokenizer-free length estimate: the larger of the whitespace word count and
    UTF-8 bytes / 4 (about 4 bytes per BPE token in English; CJK text, 3 bytes a
    character, lands near one token per character). Always >= 1."""
    return max(1, len(text.split()), math.ceil(len(text.encode("utf-8")) / 4))


def local_tokenizer_counter(path: str) -> Callable[[str], int]:
    """Token counter from a Hugging Face tokenizer on local disk (never the network)."""
    try:
        from transformers import AutoTokenizer  # optional; heavy, so imported lazily
    except ImportError:
        raise NightjarInputError("--tokenizer needs the 'transformers' package") from None
    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:  # transformers raises many types for a bad path
        raise NightjarInputError(f"cannot load tokenizer {path!r}: {exc}") from None
    return lambda text: max(1, len(tok.encode(text, add_special_tokens=False)))


def _pair(entry: Any, where: str) -> tuple[str, str] | None:
    """(first human turn, the reply after it), or None when the entry has no such pair."""
    if not isinstance(entry, dict) or not isinstance(entry.get("conversations"), list):
        raise NightjarInputError(f"{where}: expected an object with a 'conversations' list")
    turns = entry["conversations"]
    for j, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise NightjarInputError(f"{where}.conversations[{j}]: expected {{'from', 'value'}}")
    for j in range(len(turns) - 1):
        if turns[j].get("from") in _HUMAN and turns[j + 1].get("from") not in _HUMAN:
            p, o = clean_text(turns[j]["value"]), clean_text(turns[j + 1]["value"])
            return (p, o) if p.strip() and o.strip() else None
    return None


def import_sharegpt(
    path: str | Path,
    *,
    rate_rps: float,
    burstiness: float = 1.0,
    seed: int = 0,
    limit: int | None = None,
    workload: str = "sharegpt",
    count_tokens: Callable[[str], int] = estimate_tokens,
    keep_prompts: bool = True,
    name: str | None = None,
) -> tuple[Trace, ImportReport]:
    """The first ``limit`` usable conversations in file order; arrivals from a gamma
    renewal process at ``rate_rps`` (``inf``: all at time 0, like vLLM's benchmark
    default), the first request at time 0."""
    get_workload(workload)
    check_seed(seed)
    path = Path(path)
    if not (rate_rps > 0) or not (MIN_BURSTINESS <= burstiness < math.inf):
        raise NightjarInputError(
            f"--rate must be > 0 (or inf) and --burstiness a finite number >= {MIN_BURSTINESS}"
        )
    data = loads_json(read_text(path, f"{path}"), f"{path}", surrogates=True)
    if not isinstance(data, list):
        raise NightjarInputError(f"{path}: expected a JSON list of conversations")
    texts: list[str] = []
    prompt: list[int] = []
    output: list[int] = []
    skipped = 0
    for i, entry in enumerate(data):
        if limit is not None and len(texts) >= limit:
            break
        pair = _pair(entry, f"{path}: [{i}]")
        if pair is None:
            skipped += 1
            continue
        texts.append(pair[0])
        prompt.append(count_tokens(pair[0]))
        output.append(count_tokens(pair[1]))
    n = len(texts)
    arrival = renewal_arrivals(n, rate_rps, burstiness, seed)
    reason = "no human turn followed by a reply" if skipped else ""
    prompts: list[Prompt] | None = list(texts) if keep_prompts else None
    trace = _explicit(name or path.stem, arrival, prompt, output, workload, prompts, path,
                      f"Imported from ShareGPT-style dataset {path.name} at {rate_rps} req/s",
                      seed)
    return trace, ImportReport(n, skipped, reason)
