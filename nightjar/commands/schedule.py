"""``nightjar schedule``: a tuned batch-size -> K table for stock vLLM's Dynamic SD.

Searches, in the simulator, the batch-bucketed K table that serves a trace best on
a profile (its drafter included), prints it as the JSON vLLM takes
(``speculative_config.num_speculative_tokens_per_batch_size``, merged into
--speculative-config when given) on stdout, and reports on stderr what it costs
against nightjar+ and the best fixed K, on held-out seeds with 95% intervals.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from nightjar.commands.run_flags import add_run_flags, run_config
from nightjar.errors import NightjarInputError
from nightjar.live.drafter_setup import speculative_config_json
from nightjar.live.vllm_family import Family
from nightjar.profile.profile import DEFAULT_PROFILE
from nightjar.run.config import flag_of
from nightjar.trace.schema import MAX_SEED

# Held-out seeds at most (each runs the table, nightjar+ and every fixed K).
MAX_HELD_OUT = 1000
# The simulator settings that shape the load the table is tuned for.
FIELDS = ("seed", "gamma_max", "draft_kv", "offload", "engine", "acceptance", "max_num_seqs",
          "max_num_batched_tokens", "max_model_len")


def add_parser(sub: Any) -> None:
    from nightjar.sweep.table import DEFAULT_EDGES, METRICS

    p = sub.add_parser("schedule", help="tune vLLM's batch-size -> K table in the simulator",
                       description=__doc__)
    p.add_argument("--profile", default=None,
                   help=f"bundled profile name or path (default: {DEFAULT_PROFILE})")
    p.add_argument("--trace", default="burst", help="the load: a bundled trace name or path")
    add_run_flags(p, only=FIELDS, gamma_from_profile=True)
    p.add_argument("--metric", choices=list(METRICS), default="e2e",
                   help="what the table minimises (e2e, tpot, ttft: means) or maximises "
                   "(throughput, goodput)")
    p.add_argument("--buckets", default=",".join(str(e) for e in DEFAULT_EDGES),
                   help="lower edges of the batch-size buckets, from 1")
    p.add_argument("--passes", type=int, default=2, help="coordinate-descent passes at most")
    p.add_argument("--seeds", type=int, default=3, metavar="N",
                   help="held-out seeds SEED+1..SEED+N the table, nightjar+ and fixed K are "
                   "compared on (the search runs on SEED)")
    p.add_argument("--speculative-config", default=None, metavar="JSON",
                   help="your vLLM speculative config (method, model, ...); the table is "
                   "merged into it")
    p.add_argument("--vllm", default=None, metavar="VERSION",
                   help="the vLLM release the table is for (default: the installed one, "
                   "else the newest supported); a drafter it ignores the table for is refused")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.add_argument("--quiet", action="store_true", help="no search progress on stderr")
    p.set_defaults(func=run)


def _edges(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise NightjarInputError(
            f"--buckets must be comma-separated integers, got {text!r}"
        ) from None


def _base_config(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    return speculative_config_json(text)


def _target_family(version: str | None, method: str) -> Family:
    """The release family the table is for; refuses a method it ignores the table for
    (vLLM's V1 runner keeps a static K for it and only warns in its log)."""
    from nightjar.live.version import installed_vllm_version
    from nightjar.live.vllm_family import SUPPORTED_VLLM, family_of

    found = version or installed_vllm_version()
    if version is None and (found is None or found.split("+")[0] not in SUPPORTED_VLLM):
        found = SUPPORTED_VLLM[-1]
    family = family_of(found or SUPPORTED_VLLM[-1])
    if not family.honours_table(method):
        raise NightjarInputError(
            f"vLLM {found} ignores num_speculative_tokens_per_batch_size for the "
            f"{method!r} method (its V1 runner keeps a static K): use vLLM 0.34 "
            "(--vllm 0.34.0) or nightjar live"
        )
    return family


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from nightjar.profile.profile import load_profile
    from nightjar.results.outdir import check_out_file, write_out_file
    from nightjar.run.prepare import settle
    from nightjar.sweep.table import METRICS, TableSearch, compare, search_table, vllm_table
    from nightjar.trace.trace import load_trace

    if not 1 <= args.seeds <= MAX_HELD_OUT:
        # Each held-out seed runs the table, nightjar+ and every fixed K: bounded up front.
        raise NightjarInputError(f"--seeds must be in 1..{MAX_HELD_OUT}, got {args.seeds}")
    base = _base_config(args.speculative_config)
    config = run_config(args, only=FIELDS)
    if config.seed + args.seeds > MAX_SEED:
        raise NightjarInputError(
            f"--seed {config.seed} with --seeds {args.seeds}: the held-out seeds pass "
            f"{MAX_SEED}, the largest seed")
    # Before the search: an --out that cannot be written, or that would replace a
    # file without --force (the trace or profile included), is refused up front.
    out_file = None if args.out is None else check_out_file(
        args.out, args.force, inputs=[args.trace, args.profile or ""])
    profile = load_profile(args.profile or DEFAULT_PROFILE)
    _target_family(args.vllm, str(base.get("method") or profile.drafter))
    settled = settle(config, profile, gamma_given=args.gamma_max is not None, spell=flag_of)
    config = settled.config
    search = TableSearch(profile, load_trace(args.trace), settled.knobs, args.metric,
                         _edges(args.buckets), args.passes)
    err = Console(stderr=True)
    say = None if args.quiet else (lambda m: err.print(m, highlight=False))
    found = search_table(search, config.seed, say)
    seeds = [config.seed + 1 + i for i in range(args.seeds)]
    table, plus, best, fixed = compare(search, found.rows, seeds)
    label = METRICS[args.metric][2]
    report = Table("policy", label, "95% interval", title=(
        f"{profile.name} ({profile.drafter}), trace {search.trace.name}: "
        f"{len(seeds)} held-out seeds, search on seed {config.seed} ({found.runs} runs)"))
    for c in (table, plus, *fixed):
        mark = " (best fixed)" if c is best else ""
        report.add_row(c.name + mark, f"{c.value.mean:.4g}", f"{c.value.lo:.4g}..{c.value.hi:.4g}")
    err.print(report)
    err.print(f"table as the simulator runs it: {table.spec}", highlight=False, soft_wrap=True)
    out = {
        **base,
        "num_speculative_tokens": max(config.gamma_max, base.get("num_speculative_tokens", 0)),
        "num_speculative_tokens_per_batch_size": vllm_table(found.rows),
    }
    text = json.dumps(out)
    print(text)
    if out_file is not None:
        write_out_file(out_file, text + "\n", args.out)
    return 0
