"""``nightjar profile --model ...`` without ``--roofline``: measure a profile with vLLM.

Checks every input before any engine starts (one-line errors), runs the profiler,
validates the result with the same loader the simulator uses, then writes it.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.live.kv_room import check_kv_cache_gb


def _command(args: argparse.Namespace, draft: str | None, out: Path) -> str:
    parts = ["nightjar", "profile", "--model", args.model]
    if draft is not None:
        parts += ["--draft", draft]
    if args.drafter is not None:
        parts += ["--drafter", args.drafter]
    if args.speculative_config is not None:
        parts += ["--speculative-config", args.speculative_config]
    if args.batch_sizes is None:
        parts += ["--max-num-seqs", str(args.max_num_seqs)]
    for flag in ("batch_sizes", "gammas", "contexts", "prefill_lengths", "mixed_batch_sizes",
                 "mixed_tokens", "wake_pauses"):
        if getattr(args, flag) is not None:
            parts += ["--" + flag.replace("_", "-"), getattr(args, flag)]
    parts += [
        "--output-tokens",
        str(args.output_tokens),
        "--repeats",
        str(args.repeats),
        "--remeasure",
        str(args.remeasure),
        "--kv-cache-gb",
        f"{args.kv_cache_gb:g}",
        "--seed",
        str(args.seed),
    ]
    if args.prompts:
        parts += ["--prompts", args.prompts]
    parts += ["--workload", args.workload]
    if args.in_process:
        parts += ["--in-process"]
    if args.keep_inconsistent:
        parts += ["--keep-inconsistent"]
    if args.no_ladders:
        parts += ["--no-ladders"]
    if args.add_mixed_to:
        parts += ["--add-mixed-to", args.add_mixed_to]
    parts += ["--out", str(out)]
    return shlex.join(parts)


def _refuse_inconsistent(data: dict[str, Any], bad: list[Any], out: Path, keep: bool) -> None:
    """A profile whose decode cells still contradict the cost model after the re-measures
    is not written as ``out`` (it would price those steps wrong): it is kept next to it
    as ``NAME.rejected.json`` and the command fails, unless ``--keep-inconsistent``."""
    if not bad:
        return
    cells = [i.describe() for i in bad]
    data["measured"]["inconsistent_cells"] = cells
    if keep:
        return
    from nightjar.results.outdir import check_out_file, write_out_file

    rejected = out.with_name(f"{out.stem}.rejected.json")
    # Our own earlier rejection may be replaced; a FIFO, a folder or a device never.
    real = check_out_file(rejected, force=True, what="the rejected profile")
    write_out_file(real, json.dumps(data, indent=1) + "\n", rejected)
    shown = "; ".join(cells[:3]) + (f" (and {len(cells) - 3} more)" if len(cells) > 3 else "")
    raise NightjarInputError(
        f"measured profile: {len(cells)} decode cells still contradict a smaller gamma or "
        f"batch after the re-measures ({shown}); not written (kept as {rejected}): measure "
        "on a quieter machine, or give --keep-inconsistent"
    )


def run_measured(args: argparse.Namespace) -> int:
    from nightjar.live.models import check_pair, max_position, read_config, resolve_model
    from nightjar.live.profiling.inputs import (
        base_profile,
        batch_sizes,
        int_list,
        measured_drafter,
        model_name,
        read_prompts,
        seconds_list,
        with_mixed,
    )
    from nightjar.live.version import check_vllm_version
    from nightjar.profile.profile import Profile
    from nightjar.results.outdir import check_out_file, write_out_file

    out = Path(args.out) if args.out else None
    if out is None:
        raise NightjarInputError("measured profiling needs --out FILE")
    # Checked before any engine starts: never a FIFO, a folder or one of the inputs.
    real = check_out_file(out, args.force, inputs=[
        x for x in (args.add_mixed_to, args.prompts) if x])
    if not out.parent.is_dir():
        raise NightjarInputError(f"--out {out}: folder {out.parent} does not exist")
    check_kv_cache_gb(args.kv_cache_gb)
    sizes = batch_sizes(args.batch_sizes, args.max_num_seqs)
    base = base_profile(args.add_mixed_to)
    check_vllm_version()
    target = resolve_model(args.model, "model")
    method, draft_arg, draft, options = measured_drafter(
        args.model, target, args.drafter, args.speculative_config, args.draft)
    vocab = check_pair(target, draft) if draft is not None and method == "draft_model" else int(
        read_config(target).get("vocab_size") or 32000
    )

    from nightjar.live import logs

    with logs.configured(out.parent / f"{out.stem}.vllm.log", args.verbose) as log_file:
        from nightjar.live.engine_spec import prepare_env

        prepare_env()
        from nightjar.live.profiling.profiler import ProfilePlan, measure_mixed, measure_profile

        plan = ProfilePlan(
            target=target,
            draft=draft,
            target_name=model_name(args.model),
            # A lookup or MTP drafter has no checkpoint of its own: named by its method.
            draft_name=model_name(draft_arg) if draft_arg else method,
            method=method,
            spec_options=tuple(sorted(options.items())),
            batch_sizes=sizes,
            max_num_seqs=max(sizes),
            pool_cap=args.batch_sizes is None,
            gammas=int_list(args.gammas, "--gammas"),
            contexts=int_list(args.contexts, "--contexts"),
            prefill_lengths=int_list(args.prefill_lengths, "--prefill-lengths"),
            mixed_batch_sizes=int_list(args.mixed_batch_sizes, "--mixed-batch-sizes"),
            mixed_tokens=int_list(args.mixed_tokens, "--mixed-tokens"),
            wake_pauses=seconds_list(args.wake_pauses, "--wake-pauses"),
            output_tokens=args.output_tokens,
            repeats=args.repeats,
            kv_cache_bytes=int(args.kv_cache_gb * 2**30),
            vocab=vocab,
            seed=args.seed,
            prompts=read_prompts(args.prompts),
            workload=args.workload,
            command=_command(args, args.draft, out),
            model_max_len=min(max_position(target), max_position(draft or target)),
            in_process=args.in_process,
            remeasure=args.remeasure,
            ladders=not args.no_ladders,
        )
        plan.check()

        from nightjar.report.progress import LazyProgress

        with LazyProgress(enabled=not args.quiet, show_after_s=0.0) as bar:

            def tick(engine: str, done: int, total: int) -> None:
                if engine not in bar:
                    bar.add(engine, float(total))
                bar.update(engine, float(done))

            if base is None:
                data, bad = measure_profile(plan, bar.print, tick)
                _refuse_inconsistent(data, bad, out, args.keep_inconsistent)
            else:
                topped = Profile.from_json(base, str(args.add_mixed_to))

                def decode_ms(b: int, ctx: float) -> float:
                    return 1e3 * topped.step_time_s(b, 0, ctx)

                data = with_mixed(base, plan, measure_mixed(plan, decode_ms, bar.print))
    print(f"vLLM's log: {log_file}", file=sys.stderr)
    profile = Profile.from_json(data, str(out))  # validate before writing
    check_out_file(out, args.force)  # something may have appeared there while we measured
    write_out_file(real, json.dumps(data, indent=1) + "\n", out)
    b, g = profile.max_batch_size, profile.gamma_max
    c = profile.min_context_len
    print(
        f"wrote {out}: {profile.name} (measured); step at B={b} context={c:g}: "
        f"{profile.step_time_s(b, 0, c) * 1e3:.1f} ms no draft, "
        f"{profile.step_time_s(b, g, c) * 1e3:.1f} ms at gamma {g}; KV blocks "
        f"{data['measured']['kv_blocks']['with_draft']} with the draft"
    )
    from nightjar.profile.check import warning

    check = warning(data)
    if check:
        print(check, file=sys.stderr)
    return 0
