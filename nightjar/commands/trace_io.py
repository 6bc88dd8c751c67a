"""``nightjar trace list|export`` and the Vidur, vLLM-JSONL and BurstGPT importers.

Kept apart from ``commands/trace.py`` so each file stays one concern; ``trace.py``
calls :func:`add_import_parsers` and :func:`add_parsers` from its ``add_parser``.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError


def add_import_parsers(isub: Any) -> list[Any]:
    """The extra ``trace import`` kinds; returns their parsers for the shared flags."""
    vi = isub.add_parser("vidur", help="Vidur request CSV (arrived_at,num_prefill_tokens,...;"
                         " arrived_at optional)")
    vi.add_argument("file", metavar="FILE.csv")
    vi.add_argument("--limit", type=int, help="keep at most N requests")
    vi.add_argument("--rate", type=float, default=None,
                    help="generate arrivals at R req/s (default: arrived_at; a file without"
                    " it: inf, all at time 0)")
    vi.add_argument("--burstiness", type=float, default=1.0,
                    help="gamma shape of generated arrivals (1 Poisson)")
    vi.add_argument("--seed", type=int, default=0, help="seed of generated arrivals")
    bg = isub.add_parser("burstgpt", help="BurstGPT CSV (Timestamp,Model,Request tokens,...)")
    bg.add_argument("file", metavar="FILE.csv")
    bg.add_argument("--limit", type=int, help="keep at most N requests")
    bg.add_argument("--start", type=float, default=0.0, help="window start, s after row 1")
    bg.add_argument("--duration", type=float, help="window length in seconds")
    bg.add_argument("--model", help="keep only rows of this Model (e.g. ChatGPT, GPT-4)")
    vl = isub.add_parser("vllm", help="vLLM bench custom dataset JSONL ({\"prompt\": ...})")
    vl.add_argument("file", metavar="FILE.jsonl")
    vl.add_argument("--rate", type=float, default=math.inf,
                    help="arrival rate in req/s (default inf: all at time 0)")
    vl.add_argument("--burstiness", type=float, default=1.0)
    vl.add_argument("--seed", type=int, default=0)
    vl.add_argument("--limit", type=int, help="keep at most N prompts")
    vl.add_argument("--output-len", type=int, default=256,
                    help="output tokens where a line has no output_tokens (vLLM's default 256)")
    vl.add_argument("--tokenizer", help="local Hugging Face tokenizer dir (default: estimate)")
    vl.add_argument("--no-prompts", action="store_true", help="do not store prompt text")
    return [vi, bg, vl]


def add_parsers(tsub: Any) -> None:
    ls = tsub.add_parser("list", help="list the bundled traces")
    ls.set_defaults(trace_func=run_list)
    ex = tsub.add_parser("export", help="write a trace in another tool's format")
    ex.add_argument("trace", metavar="NAME_OR_PATH")
    ex.add_argument("--format", choices=["vidur", "vllm-timed-trace", "json", "parquet"],
                    default="vidur",
                    help="vidur: Vidur's request CSV (arrived_at,num_prefill_tokens,...); "
                    "vllm-timed-trace: JSONL for `vllm bench serve --dataset-name "
                    "timed_trace` (the same arrival times); json / parquet: nightjar's "
                    "explicit trace formats")
    ex.add_argument("--seed", type=int, help="override a generative trace's seed")
    ex.add_argument("--out", required=True, help="output file")
    ex.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    ex.set_defaults(trace_func=run_export)
    sc = tsub.add_parser("schema", help="print the trace format's JSON Schema (for editors)")
    sc.set_defaults(trace_func=run_schema)


def import_other(args: argparse.Namespace) -> Any:
    """(trace, report) for the kinds this module adds, or None for the others."""
    from nightjar.trace.tool_formats import import_burstgpt_csv, import_vidur_csv, import_vllm_jsonl

    if args.import_kind == "vidur":
        return import_vidur_csv(args.file, limit=args.limit, workload=args.workload,
                                name=args.name, rate_rps=args.rate,
                                burstiness=args.burstiness, seed=args.seed)
    if args.import_kind == "burstgpt":
        if args.start < 0 or (args.duration is not None and args.duration <= 0):
            raise NightjarInputError("--start must be >= 0 and --duration > 0")
        return import_burstgpt_csv(args.file, limit=args.limit, start_s=args.start,
                                   duration_s=args.duration, model=args.model,
                                   workload=args.workload, name=args.name)
    if args.import_kind == "vllm":
        from nightjar.trace.importers import local_tokenizer_counter

        kw: dict[str, Any] = {}
        if args.tokenizer:
            kw["count_tokens"] = local_tokenizer_counter(args.tokenizer)
        else:
            print("lengths estimated from text (no tokenizer given)")
        return import_vllm_jsonl(args.file, rate_rps=args.rate, burstiness=args.burstiness,
                                 seed=args.seed, output_len=args.output_len, limit=args.limit,
                                 workload=args.workload, keep_prompts=not args.no_prompts,
                                 name=args.name, **kw)
    return None


def run_list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from nightjar.trace.trace import bundled_traces, load_trace

    table = Table(title="bundled traces (nightjar sim --trace NAME)")
    for col in ("name", "requests", "span s", "mean req/s", "description"):
        table.add_column(col, justify="left" if col in ("name", "description") else "right",
                         no_wrap=col != "description")
    for name in bundled_traces():
        trace = load_trace(name)
        rate = len(trace) / max(trace.duration_s, 1e-9)
        table.add_row(name, str(len(trace)), f"{trace.duration_s:.0f}", f"{rate:.1f}",
                      trace.description or "-")
    Console().print(table)
    return 0


def run_schema(args: argparse.Namespace) -> int:
    from nightjar.schemas import schema_text

    print(schema_text("trace"), end="")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from nightjar.commands.trace_files import check_format, write_trace
    from nightjar.results.outdir import check_out_file, write_out_file
    from nightjar.trace.tool_formats import vidur_csv
    from nightjar.trace.trace import load_trace

    if args.format not in ("vidur", "vllm-timed-trace"):
        check_format(args.format)
    out = check_out_file(args.out, args.force, inputs=[args.trace])
    trace = load_trace(args.trace, seed=args.seed)
    if args.format == "vllm-timed-trace":
        from nightjar.trace.vllm_timed import timed_trace_jsonl

        write_out_file(out, timed_trace_jsonl(trace), Path(args.out))
        print(f"wrote {args.out}: {len(trace)} requests; replay them with `vllm bench serve "
              f"--dataset-name timed_trace --dataset-path {args.out} --num-prompts "
              f"{len(trace)} --ignore-eos`")
        return 0
    if args.format != "vidur":
        write_trace(out, Path(args.out), trace, args.format)
        print(f"wrote {args.out}: {len(trace)} requests as a {args.format} trace")
        return 0
    write_out_file(out, vidur_csv(trace), Path(args.out))
    print(f"wrote {args.out}: {len(trace)} requests as a Vidur request CSV")
    return 0
