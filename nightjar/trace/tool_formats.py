"""The trace formats other tools use: Vidur, vLLM's custom benchmark dataset, BurstGPT.

- Vidur request CSV (``arrived_at,num_prefill_tokens,num_decode_tokens``, times in
  seconds; other columns ignored): imported as is, and a nightjar trace exports to it.
  Vidur's length-only files (no ``arrived_at``) get arrivals generated at a rate.
- vLLM ``bench serve --dataset-name custom`` JSONL: one object per line with a
  ``prompt`` string and, optionally, ``output_tokens`` (vLLM takes the output length
  from ``--custom-output-len``, default 256, which ``output_len`` mirrors). Lengths
  are estimated from the text unless a local tokenizer is given; arrivals are
  generated at a chosen rate, as vLLM's benchmark does.
- BurstGPT CSV (``Timestamp,Model,Request tokens,Response tokens,...``; timestamps in
  seconds from the start of the log): rows with zero response tokens are failed
  requests and are skipped, as in BurstGPT's ``without_fails`` release.

Every malformed row is a one-line error naming the file and line.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np

from nightjar.errors import NightjarInputError
from nightjar.reading import clean_text, loads_json, read_text
from nightjar.trace.csv_rows import csv_header, csv_rows
from nightjar.trace.fast_csv import Kept, SlowPath, Window, chunks, counts, seconds
from nightjar.trace.importers import (
    ImportReport,
    TimeWindow,
    _explicit,
    estimate_tokens,
    renewal_arrivals,
)
from nightjar.trace.trace import Prompt, Trace
from nightjar.trace.workloads import MAX_TOKENS, get_workload

VIDUR_COLUMNS = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
# Vidur's length-only traces (its synthetic and dataset-derived request files).
VIDUR_LENGTHS = ("num_prefill_tokens", "num_decode_tokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
VLLM_DEFAULT_OUTPUT_LEN = 256


def _number(text: str, col: str, where: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise NightjarInputError(f"{where}: {col} {text!r} is not a number") from None
    if not math.isfinite(v) or v < 0:
        raise NightjarInputError(f"{where}: {col} must be a finite number >= 0 (got {text})")
    return v


def _count(text: str, col: str, where: str) -> int:
    v = _number(text, col, where)
    if v != int(v):
        raise NightjarInputError(f"{where}: {col} {text!r} is not an integer")
    if v > MAX_TOKENS:
        raise NightjarInputError(f"{where}: {col} must be in 0..{MAX_TOKENS} (got {text[:40]})")
    return int(v)


def import_vidur_csv(
    path: str | Path, *, limit: int | None = None, workload: str = "sharegpt",
    name: str | None = None, rate_rps: float | None = None, burstiness: float = 1.0,
    seed: int = 0,
) -> tuple[Trace, ImportReport]:
    """A Vidur request trace, arrival times as they are (so export and import round-trip).

    Vidur's length-only traces (``num_prefill_tokens,num_decode_tokens,...`` with no
    ``arrived_at``) get arrivals generated at ``rate_rps`` (a gamma renewal process of
    shape ``burstiness``, the first at time 0; ``inf``, the default for them, sends
    all at time 0), as for ShareGPT; ``rate_rps`` given for a trace with
    ``arrived_at`` replaces its times the same way.
    """
    get_workload(workload)
    if rate_rps is not None:
        renewal_arrivals(0, rate_rps, burstiness, seed)  # bad flags fail before the read
    path = Path(path)
    timed = "arrived_at" in csv_header(path)
    columns = VIDUR_COLUMNS if timed else VIDUR_LENGTHS
    try:
        arrival, prompt, output, skipped = _vidur_fast(path, columns, limit)
    except SlowPath:
        arrival, prompt, output, skipped = _vidur_rows(path, columns, limit)
    if not timed or rate_rps is not None:
        arrival = renewal_arrivals(len(prompt), math.inf if rate_rps is None else rate_rps,
                                   burstiness, seed)
    how = "" if timed and rate_rps is None else (
        f", arrivals generated at {rate_rps if rate_rps is not None else math.inf:g} req/s")
    trace = _explicit(name or path.stem, arrival, prompt, output, workload,
                      None, path, f"Imported from Vidur request trace {path.name}{how}", seed)
    reason = "zero prefill or decode tokens" if skipped else ""
    return trace, ImportReport(len(prompt), skipped, reason)


def _vidur_fast(path: Path, columns: tuple[str, ...], limit: int | None
                ) -> tuple[list[float], list[int], list[int], int]:
    kept = Kept()
    for chunk in chunks(path, columns):
        p = counts(chunk["num_prefill_tokens"], integral_floats=True)
        o = counts(chunk["num_decode_tokens"], integral_floats=True)
        t = (seconds(chunk["arrived_at"], finite_only=True) if "arrived_at" in columns
             else np.zeros(len(p)))
        if (t < 0).any():
            raise SlowPath("arrived_at")
        keep = (p > 0) & (o > 0)
        stop = len(p)
        if limit is not None:
            reached = np.flatnonzero(kept.count + np.cumsum(keep) >= limit)
            stop = int(reached[0]) + 1 if reached.size else stop
        k = keep[:stop]
        kept.zero += int(np.count_nonzero(~k))
        kept.add(t[:stop][k], p[:stop][k], o[:stop][k])
        if limit is not None and kept.count >= limit:
            break
    return (*kept.columns(), kept.zero)


def _vidur_rows(path: Path, columns: tuple[str, ...], limit: int | None
                ) -> tuple[list[float], list[int], list[int], int]:
    arrival: list[float] = []
    prompt: list[int] = []
    output: list[int] = []
    skipped = 0
    for where, row in csv_rows(path, columns):
        t = _number(row["arrived_at"], "arrived_at", where) if "arrived_at" in row else 0.0
        p = _count(row["num_prefill_tokens"], "num_prefill_tokens", where)
        o = _count(row["num_decode_tokens"], "num_decode_tokens", where)
        if p == 0 or o == 0:
            skipped += 1
            continue
        arrival.append(t)
        prompt.append(p)
        output.append(o)
        if limit is not None and len(arrival) >= limit:
            break
    return arrival, prompt, output, skipped


def vidur_csv(trace: Trace) -> str:
    """``trace`` as a Vidur request CSV (arrival in seconds, prompt and output lengths);
    workloads, acceptance and prompt text have no Vidur column and are dropped."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(VIDUR_COLUMNS)
    for t, p, o in zip(trace.arrival_s, trace.prompt_tokens, trace.output_tokens, strict=True):
        writer.writerow([f"{float(t):.6f}", int(p), int(o)])
    return buf.getvalue()


def export_vidur_csv(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` as a Vidur request CSV (:func:`vidur_csv`)."""
    path = Path(path)
    try:
        path.write_text(vidur_csv(trace), encoding="utf-8", newline="")
    except OSError as exc:
        raise NightjarInputError(f"cannot write {path}: {exc.strerror or exc}") from None
    return path


def import_burstgpt_csv(
    path: str | Path, *, limit: int | None = None, start_s: float = 0.0,
    duration_s: float | None = None, model: str | None = None, workload: str = "sharegpt",
    name: str | None = None,
) -> tuple[Trace, ImportReport]:
    """BurstGPT rows (optionally of one ``Model``) whose timestamp lies in
    ``[start_s, start_s + duration_s)`` after the first row's, re-based to 0 (read in
    chunks, as the Azure importer)."""
    get_workload(workload)
    path = Path(path)
    try:
        arrival, prompt, output, skipped = _burstgpt_fast(path, start_s, duration_s, model,
                                                          limit)
    except SlowPath:
        arrival, prompt, output, skipped = _burstgpt_rows(path, start_s, duration_s, model,
                                                          limit)
    trace = _explicit(name or path.stem, arrival, prompt, output,
                      workload, None, path, f"Imported from BurstGPT trace {path.name}")
    reason = "zero request or response tokens (failed requests)" if skipped else ""
    return trace, ImportReport(len(arrival), skipped, reason)


def _burstgpt_fast(path: Path, start_s: float, duration_s: float | None, model: str | None,
                   limit: int | None) -> tuple[list[float], list[int], list[int], int]:
    end = math.inf if duration_s is None else start_s + duration_s
    window = Window(start_s, end, limit)
    columns = BURSTGPT_COLUMNS + (("Model",) if model is not None else ())
    for chunk in chunks(path, columns, text=("Model",) if model is not None else ()):
        ts = seconds(chunk["Timestamp"], finite_only=True)
        if (ts < 0).any():
            raise SlowPath("Timestamp")
        req = counts(chunk["Request tokens"])
        resp = counts(chunk["Response tokens"])
        wanted = None if model is None else (chunk["Model"].str.strip() == model).to_numpy()
        window.offer(ts, req, resp, wanted)
        if window.full:
            break
    kept = window.kept
    return (*kept.columns(), kept.zero)


def _burstgpt_rows(path: Path, start_s: float, duration_s: float | None, model: str | None,
                   limit: int | None) -> tuple[list[float], list[int], list[int], int]:
    window = TimeWindow(start_s, duration_s, limit)
    for where, row in csv_rows(path, BURSTGPT_COLUMNS):
        t = window.rebase(_number(row["Timestamp"], "Timestamp", where), where, "Timestamp")
        req = _count(row["Request tokens"], "Request tokens", where)
        resp = _count(row["Response tokens"], "Response tokens", where)
        if model is not None and row.get("Model") != model:
            continue
        if window.take(t, req, resp):
            break
    return window.arrival, window.prompt, window.output, window.zero


def import_vllm_jsonl(
    path: str | Path, *, rate_rps: float, burstiness: float = 1.0, seed: int = 0,
    output_len: int = VLLM_DEFAULT_OUTPUT_LEN, limit: int | None = None,
    workload: str = "sharegpt", count_tokens: Callable[[str], int] = estimate_tokens,
    keep_prompts: bool = True, name: str | None = None,
) -> tuple[Trace, ImportReport]:
    """vLLM's custom benchmark dataset, in file order (vLLM shuffles; a trace keeps the
    file's order so that it is reproducible without vLLM's seed)."""
    get_workload(workload)
    path = Path(path)
    if not (rate_rps > 0) or not (burstiness > 0 and math.isfinite(burstiness)):
        raise NightjarInputError("--rate must be > 0 (or inf) and --burstiness > 0")
    if not 1 <= output_len <= MAX_TOKENS:
        raise NightjarInputError(f"--output-len must be in 1..{MAX_TOKENS} (got {output_len})")
    texts: list[str] = []
    prompt: list[int] = []
    output: list[int] = []
    # JSON Lines end at "\n" only: str.splitlines() would also split at U+2028 and
    # the other separators a JSON string may hold raw.
    lines = read_text(path, f"{path}").split("\n")
    for number, line in enumerate(lines, start=1):
        if limit is not None and len(texts) >= limit:
            break
        if not line.strip():
            continue
        where = f"{path}: line {number}"
        item = loads_json(line, where, surrogates=True)
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise NightjarInputError(f"{where}: expected an object with a 'prompt' string")
        out = item.get("output_tokens", output_len)
        if isinstance(out, bool) or not isinstance(out, int) or not 1 <= out <= MAX_TOKENS:
            raise NightjarInputError(
                f"{where}: output_tokens must be an integer in 1..{MAX_TOKENS}")
        text = clean_text(item["prompt"])
        texts.append(text)
        prompt.append(count_tokens(text))
        output.append(out)
    n = len(texts)
    arrival = renewal_arrivals(n, rate_rps, burstiness, seed)
    prompts: list[Prompt] | None = list(texts) if keep_prompts else None
    trace = _explicit(name or path.stem, arrival, prompt, output, workload, prompts, path,
                      f"Imported from vLLM custom dataset {path.name} at {rate_rps} req/s", seed)
    return trace, ImportReport(n, 0, "")
