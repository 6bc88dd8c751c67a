"""``nightjar trace gen|show|import``: make, inspect and import request traces."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from nightjar.commands.trace_files import check_format, write_json, write_trace
from nightjar.errors import NightjarInputError
from nightjar.trace.importers import import_azure_csv, import_sharegpt, local_tokenizer_counter
from nightjar.trace.schema import FORMAT_VERSION, parse_trace_json
from nightjar.trace.trace import (
    Trace,
    arrival_rates,
    interarrival_cv,
    load_trace,
    materialize,
)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("trace", help="generate, show and import request traces")
    tsub = p.add_subparsers(dest="trace_command", required=True, parser_class=type(p))

    g = tsub.add_parser("gen", help="generate a trace with gamma-distributed arrivals")
    g.add_argument("--rate", type=float, help="requests per second (one segment)")
    g.add_argument("--duration", type=float, help="seconds (one segment)")
    g.add_argument("--segments", help='"RATE:SECONDS[:BURSTINESS],..." e.g. "2:30,8:30,24:30"')
    g.add_argument("--burstiness", type=float, default=1.0,
                   help="gamma shape of inter-arrival times: 1 Poisson, <1 burstier (default 1)")
    g.add_argument("--workload", default="sharegpt", help="length/acceptance workload")
    g.add_argument("--seed", type=int, default=0, help="seed of arrivals and lengths")
    g.add_argument("--name", help="trace name (default: the output file's stem)")
    g.add_argument("--generative", action="store_true",
                   help="write the segments spec instead of the materialized requests")
    g.add_argument("--out", required=True, help="output file")
    g.add_argument("--format", choices=["json", "parquet"], default="json",
                   help="json (default) or parquet (columnar, needs pyarrow; not --generative)")
    g.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    g.set_defaults(trace_func=run_gen)

    s = tsub.add_parser("show", help="summarize a trace (bundled name or path)")
    s.add_argument("trace", metavar="NAME_OR_PATH")
    s.add_argument("--seed", type=int, help="override a generative trace's seed")
    s.add_argument("--window", type=float, help="rate window in seconds (default: span / 48)")
    s.set_defaults(trace_func=run_show)

    imp = tsub.add_parser(
        "import", help="import Azure, BurstGPT or Vidur CSVs, ShareGPT or vLLM datasets"
    )
    isub = imp.add_subparsers(dest="import_kind", required=True, parser_class=type(p))
    az = isub.add_parser("azure", help="Azure LLM inference CSV (TIMESTAMP,ContextTokens,...)")
    az.add_argument("file", metavar="FILE.csv")
    az.add_argument("--limit", type=int, help="keep at most N requests")
    az.add_argument("--start", type=float, default=0.0, help="window start, s after row 1")
    az.add_argument("--duration", type=float, help="window length in seconds")
    sg = isub.add_parser("sharegpt", help="vLLM benchmark-style ShareGPT JSON dataset")
    sg.add_argument("file", metavar="FILE.json")
    sg.add_argument("--rate", type=float, default=math.inf,
                    help="arrival rate in req/s (default inf: all at time 0)")
    sg.add_argument("--burstiness", type=float, default=1.0, help="gamma shape of arrivals")
    sg.add_argument("--seed", type=int, default=0, help="seed of arrivals and sampling")
    sg.add_argument("--limit", type=int, help="keep at most N conversations")
    sg.add_argument("--tokenizer", help="local Hugging Face tokenizer dir (default: estimate)")
    sg.add_argument("--no-prompts", action="store_true", help="do not store prompt text")
    from nightjar.commands import trace_io

    for q in (az, sg, *trace_io.add_import_parsers(isub)):
        q.add_argument("--workload", default="sharegpt", help="workload for acceptance")
        q.add_argument("--rate-scale", type=float, default=1.0, metavar="S",
                       help="multiply the request rate by S (arrival times divided by S)")
        q.add_argument("--out", required=True, help="output file")
        q.add_argument("--format", choices=["json", "parquet"], default="json",
                       help="json (default) or parquet (columnar: a few bytes a request;"
                       " needs pyarrow)")
        q.add_argument("--force", action="store_true", help="overwrite --out if it exists")
        q.add_argument("--name", help="trace name (default: the input file's stem)")
    imp.set_defaults(trace_func=run_import)
    trace_io.add_parsers(tsub)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    code: int = args.trace_func(args)
    return code


def parse_segments(text: str, burstiness: float) -> list[dict[str, float]]:
    """``"2:30,8:30:0.5"`` -> segment objects (burstiness defaults to ``burstiness``)."""
    segs: list[dict[str, float]] = []
    for k, part in enumerate(text.split(",")):
        fields = part.strip().split(":")
        try:
            if len(fields) not in (2, 3):
                raise ValueError
            nums = [float(x) for x in fields]
        except ValueError:
            raise NightjarInputError(
                f"--segments item {k + 1} {part.strip()!r}: expected RATE:SECONDS[:BURSTINESS]"
            ) from None
        segs.append({"duration_s": nums[1], "rate_rps": nums[0],
                     "burstiness": nums[2] if len(nums) == 3 else burstiness})
    return segs


def _out(args: argparse.Namespace, *inputs: str) -> Path:
    """``--out`` resolved and checked before any work (never a FIFO, a folder, an input)."""
    from nightjar.results.outdir import check_out_file

    return check_out_file(args.out, args.force, inputs=inputs)


def run_gen(args: argparse.Namespace) -> int:
    real = _out(args)
    if args.segments:
        if args.rate is not None or args.duration is not None:
            raise NightjarInputError("give either --segments or --rate/--duration, not both")
        segments = parse_segments(args.segments, args.burstiness)
    elif args.rate is None or args.duration is None:
        raise NightjarInputError("trace gen needs --rate and --duration (or --segments)")
    else:
        segments = [{"duration_s": args.duration, "rate_rps": args.rate,
                     "burstiness": args.burstiness}]
    name = args.name or Path(args.out).stem
    spec_obj: dict[str, Any] = {
        "format_version": FORMAT_VERSION, "name": name, "seed": args.seed,
        "description": f"nightjar trace gen --segments {_fmt_segments(segments)}",
        "workload": args.workload, "segments": segments,
    }
    if args.generative and args.format == "parquet":
        raise NightjarInputError("--generative writes a JSON segments spec; drop --format parquet")
    check_format(args.format)
    # Validate (and materialize) even in --generative mode so bad flags fail here.
    trace = materialize(parse_trace_json(spec_obj, "trace gen", name))
    shown = Path(args.out)
    out = (write_json(real, shown, spec_obj) if args.generative
           else write_trace(real, shown, trace, args.format))
    print(f"wrote {out}: {len(trace)} requests over {trace.duration_s:.1f} s")
    return 0


def _fmt_segments(segs: list[dict[str, float]]) -> str:
    return ",".join(f"{s['rate_rps']:g}:{s['duration_s']:g}:{s['burstiness']:g}" for s in segs)


def run_import(args: argparse.Namespace) -> int:
    if args.limit is not None and args.limit < 1:
        raise NightjarInputError(f"--limit must be >= 1 (got {args.limit})")
    if not (math.isfinite(args.rate_scale) and args.rate_scale > 0):
        raise NightjarInputError(f"--rate-scale must be a finite number > 0, got {args.rate_scale}")
    check_format(args.format)
    real = _out(args, args.file)  # before reading a file of millions of rows
    from nightjar.commands.trace_io import import_other

    other = import_other(args)
    if other is not None:
        trace, rep = other
    elif args.import_kind == "azure":
        if not 0 <= args.start < math.inf:  # also refuses NaN
            raise NightjarInputError(f"--start must be a finite number >= 0 (got {args.start})")
        if args.duration is not None and not args.duration > 0:
            raise NightjarInputError(f"--duration must be > 0 (got {args.duration})")
        trace, rep = import_azure_csv(args.file, limit=args.limit, start_s=args.start,
                                      duration_s=args.duration, workload=args.workload,
                                      name=args.name)
    else:
        counter = local_tokenizer_counter(args.tokenizer) if args.tokenizer else None
        kw: dict[str, Any] = {"count_tokens": counter} if counter else {}
        trace, rep = import_sharegpt(args.file, rate_rps=args.rate, burstiness=args.burstiness,
                                     seed=args.seed, limit=args.limit, workload=args.workload,
                                     keep_prompts=not args.no_prompts, name=args.name, **kw)
        if counter is None:
            print("lengths estimated from text (no tokenizer given)")
    trace = trace.rate_scaled(args.rate_scale)
    out = write_trace(real, Path(args.out), trace, args.format)
    skipped = f"; skipped {rep.skipped} ({rep.reason})" if rep.skipped else ""
    print(f"wrote {out}: {rep.kept} requests over {trace.duration_s:.1f} s{skipped}")
    return 0


def _dist(x: np.ndarray) -> str:
    return (f"mean {x.mean():.1f}  p50 {np.percentile(x, 50):.0f}  "
            f"p99 {np.percentile(x, 99):.0f}  max {x.max()}")


def run_show(args: argparse.Namespace) -> int:
    from rich.console import Console  # deferred: only `show` renders tables
    from rich.table import Table

    from nightjar.report.sparkline import sparkline

    trace: Trace = load_trace(args.trace, seed=args.seed)
    window = args.window if args.window is not None else max(trace.duration_s / 48, 1e-3)
    rates = arrival_rates(trace, window)
    cv = interarrival_cv(trace)
    wl, counts = np.unique(trace.workload.astype(str), return_counts=True)
    mean_rate = len(trace) / max(trace.duration_s, 1e-9)
    fixed = int(np.count_nonzero(~np.isnan(trace.acceptance)))
    table = Table(title=f"trace {trace.name}", show_header=False)
    table.add_column(style="bold")
    table.add_column()
    rows = [
        ("description", trace.description or "-"),
        ("requests", f"{len(trace)} (seed {trace.seed})"),
        ("duration", f"{trace.duration_s:.1f} s, mean rate {mean_rate:.2f} req/s"),
        ("prompt tokens", _dist(trace.prompt_tokens)),
        ("output tokens", _dist(trace.output_tokens)),
        ("workloads", ", ".join(f"{w} x{c}" for w, c in zip(wl, counts, strict=True))),
        ("acceptance", f"fixed for {fixed} requests" if fixed else "drawn from workload"),
        ("inter-arrival CV", f"{cv:.2f} (Poisson 1; shape ~ 1/CV^2 = {1 / cv**2:.2f})"
         if cv > 0 else "n/a"),
        (f"rate / {window:g} s", f"{sparkline(rates)}  {rates.min():.1f}..{rates.max():.1f} req/s"),
        ("prompts", "text or token ids included" if trace.prompts is not None else "none"),
    ]
    for k, v in rows:
        table.add_row(k, v)
    Console().print(table)
    return 0
