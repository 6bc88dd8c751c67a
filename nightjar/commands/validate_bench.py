"""``nightjar validate --live-run BENCH``: the agreement check over a benchmark's rounds.

Every run of a ``nightjar bench live`` folder is replayed in the simulator with the
benchmark's own engine settings (gamma_max, draft-KV mode, batch cap, seed) and
judged pair by pair (:mod:`nightjar.fidelity.agreement`): which pairs the engine separated and
whether the simulator orders each the same way, the per-metric errors with their
intervals, the noise floor, and every live step priced by the simulator per kind.

``--time-base round`` prices each run at its machine's speed: a shared host drifted
~1.5x between a profile and the benchmark after it (reports/simulator), more than any
term the profile models. Each round's reference runs (the noise floor's twins: one
policy run twice) give the round's time base (:func:`nightjar.fidelity.compare.time_base`), and
every run of the round is simulated and replayed on the profile scaled by it; a twin
by the other twin's, so that no run is priced from its own steps. ``--time-base run``
prices each run at its own steps' factor instead
(:func:`nightjar.fidelity.time_base.run_time_bases`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

import pandas as pd
from rich.console import Console

from nightjar.errors import NightjarInputError
from nightjar.run.config import flag_of

if TYPE_CHECKING:
    from nightjar.profile.profile import Profile
    from nightjar.results.bench import BenchRecord
    from nightjar.run.config import RunConfig


def bench_config(record: BenchRecord, args: argparse.Namespace) -> RunConfig:
    """The run settings a benchmark's replays use: the flags, overridden by what the
    benchmark's engines ran with (gamma_max, draft-KV mode, batch caps, seed, memory)."""
    from nightjar.checks import integer, text
    from nightjar.commands.run_flags import run_config
    from nightjar.commands.validate_common import LIVE_RUN_FIELDS, live_offload
    from nightjar.results.bench import BENCH_FILE

    meta = record.meta
    at = f"{record.folder}: {BENCH_FILE}"
    return dataclasses.replace(
        run_config(args, only=LIVE_RUN_FIELDS),
        gamma_max=integer(meta.get("gamma_max", args.gamma_max), f"{at}: gamma_max", lo=0),
        draft_kv=text(meta.get("draft_kv", args.draft_kv), f"{at}: draft_kv"),
        max_num_seqs=integer(meta.get("max_num_seqs", args.max_num_seqs),
                             f"{at}: max_num_seqs", lo=1),
        max_num_batched_tokens=integer(
            meta.get("max_num_batched_tokens", args.max_num_batched_tokens),
            f"{at}: max_num_batched_tokens", lo=1),
        seed=integer(meta.get("seed", args.seed), f"{at}: seed"),
        offload=live_offload([run.result for run in record.runs]),
    )


def run_bench_validation(args: argparse.Namespace) -> int:
    from nightjar.commands.validate_common import check_binding
    from nightjar.commands.validate_common import table as _table
    from nightjar.fidelity.agreement import JUDGED, bench_agreement
    from nightjar.fidelity.compare import step_replay, trace_of
    from nightjar.fidelity.time_base import (
        replay_by_kind,
        run_base_line,
        run_time_bases,
        time_base_line,
        time_bases,
    )
    from nightjar.live.binding import binding_from_json
    from nightjar.profile.profile import load_profile
    from nightjar.results.bench import read_bench
    from nightjar.results.metrics import summarize
    from nightjar.results.outdir import check_out_dir, staged_out_dir
    from nightjar.run.prepare import settle
    from nightjar.sim import servable, simulate

    if len(args.live_run) != 1:
        raise NightjarInputError("give one benchmark folder per `nightjar validate` (one trace)")
    record = read_bench(args.live_run[0])
    meta = record.meta
    profile = load_profile(args.profile)
    console = Console()
    check_binding(profile, [binding_from_json(meta.get("cpu_binding"))], args.any_binding,
                  console)
    config = bench_config(record, args)
    cfg = settle(config, profile, spell=flag_of).knobs
    # Every input before any output (as `nightjar validate` on run folders): a request
    # the profile's pool can never hold fails here, and so does an unusable --out.
    for run in record.runs:
        servable(trace_of(run.result), profile, cfg)
    if args.out is not None:
        check_out_dir(args.out, args.force)
    sync = config.draft_kv == "sync"
    bases: dict[tuple[int, str], float] = {}
    if args.time_base == "round":
        bases = time_bases(record.runs, profile, sync)
    elif args.time_base == "run":
        bases = run_time_bases(record.runs, profile, sync)
    scaled: dict[float, Profile] = {}
    sims: dict[tuple[int, str], dict[str, float]] = {}
    replays = []
    for run in record.runs:
        base = bases.get((run.round, run.label))
        priced_on = profile if base is None else scaled.setdefault(base, profile.scaled(base))
        sim = simulate(trace_of(run.result), priced_on, run.policy, cfg)
        s = summarize(sim).as_dict()
        sims[(run.round, run.label)] = {k: float(s[k]) for k in JUDGED}
        rep = step_replay(run.result, priced_on, sync)
        replays.append(rep.assign(policy=run.label, round=run.round))
    agree = bench_agreement(record.runs, sims)
    console.print(f"benchmark {record.folder}: trace {meta.get('trace')}, "
                  f"{agree.rounds} rounds ({agree.clean_rounds} used), policies "
                  f"{', '.join(str(p) for p in meta.get('policies') or [])}; "
                  f"profile {profile.name}")
    if bases:
        console.print(time_base_line(bases, record.runs) if args.time_base == "round"
                      else run_base_line(bases))
    replay = replay_by_kind(pd.concat(replays, ignore_index=True))
    console.print(_table(replay, "every live step priced by the simulator, per kind "
                         "(error of the total, mean ± 95% over the rounds)"))
    console.print(_table(_errors_view(agree.errors), "simulated vs live per policy and metric "
                         "(error of the simulated value, mean ± 95% over the rounds)"))
    if len(agree.noise):
        console.print(_table(agree.noise, "noise floor: one policy twice per round, live"))
    pairs = agree.pairs_frame()
    console.print(_table(pairs, "pairs (live: paired per-round difference; a pair the engine "
                         "did not separate is unresolved, never a miss)"))
    for key in JUDGED:
        console.print(agree.verdict(key))
    errs = agree.errors
    inside = int(errs["within_10"].sum())
    worst = ""
    if len(errs) and errs["error_pct"].notna().any():
        row = errs.iloc[int(errs["error_pct"].abs().to_numpy().argmax())]
        worst = f"; largest {row['policy']} {row['metric']} {row['error_pct']:+.1f}%"
    console.print(f"errors within 10%: {inside} of {len(errs)} (policy x metric){worst}")
    staged = staged_out_dir(args.out, args.force) if args.out is not None else nullcontext(None)
    with staged as tmp:
        if tmp is not None:
            pairs.to_csv(tmp / "pairs.csv", index=False)
            errs.to_csv(tmp / "errors.csv", index=False)
            agree.noise.to_csv(tmp / "noise.csv", index=False)
            replay.to_csv(tmp / "step_replay.csv", index=False)
    if args.out is not None:
        console.print(f"wrote {args.out}/")
    return 0


def _errors_view(errors: pd.DataFrame) -> pd.DataFrame:
    def cell(row: Any) -> str:
        if not math.isfinite(row["error_pct"]):
            return "-"
        half = (row["error_hi"] - row["error_lo"]) / 2
        return (f"{row['error_pct']:+.1f} ± {half:.1f}" if math.isfinite(half)
                else f"{row['error_pct']:+.1f}")

    view = errors.assign(error=errors.apply(cell, axis=1))
    return view.pivot(index="policy", columns="metric", values="error").reset_index()
