"""The sweep driver: validate the grid, skip finished cells, run the rest, write the table.

Resuming is the normal path, not a special mode: every run looks up each cell of its
grid in ``<out>/cells/`` by the cell's key (parameters, input contents, version) and
computes only the missing ones. Rerunning a finished sweep computes nothing; a larger
grid in the same folder computes only its new cells.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from nightjar.errors import NightjarInputError
from nightjar.results.alternatives import add_to_rows
from nightjar.results.lock import holding
from nightjar.results.outdir import check_out_dir
from nightjar.results.provenance import command_line
from nightjar.sweep.backends import run_tasks
from nightjar.sweep.cell import Cell, CellTask, digest
from nightjar.sweep.spec import SweepSpec
from nightjar.sweep.store import (
    SPEC_FILE,
    load_cell,
    prepare_sweep_dir,
    save_cell,
    table_frame,
    write_atomic,
    write_table,
)


@dataclass
class SweepOutcome:
    """What a sweep run did: the table (one row per cell, grid order) and its counts."""

    frame: pd.DataFrame
    computed: int
    reused: int
    paths: list[Path] = field(default_factory=list)
    # (cell parameters, one-line reason) of cells that failed; a rerun retries them.
    failed: list[tuple[dict[str, Any], str]] = field(default_factory=list)


def _trace_text(name: str) -> str:
    """The trace's JSON text, read once (never blocking) and validated: a bad trace
    fails before any cell runs, and every cell runs the very text checked here. Cells
    take JSON text: a parquet trace ships as the explicit form of the same requests."""
    from nightjar.reading import loads_json
    from nightjar.trace.columnar import is_parquet
    from nightjar.trace.schema import parse_trace_json
    from nightjar.trace.trace import load_trace, materialize, read_trace_source, trace_to_json

    if is_parquet(Path(name)):
        return json.dumps(trace_to_json(load_trace(name)))
    label, text, default_name = read_trace_source(name)
    materialize(parse_trace_json(loads_json(text, label), label, default_name))
    return text


def _check_inputs(spec: SweepSpec, traces: dict[str, str], profiles: dict[str, Any]) -> None:
    """What every cell will run, checked before the first one does: each trace at each
    seed and rate scale is a valid trace, and each of its requests can ever run on each
    profile under each cell's memory settings (or ``--on-unfit skip`` leaves it out)."""
    from nightjar.run.prepare import settle
    from nightjar.sim import OnUnfit, servable
    from nightjar.sweep.cell import _trace

    fits = {(c.profile, c.settings.offload, c.settings.max_model_len): c for c in spec.cells()}
    for name, text in traces.items():
        for seed in spec.axes["seeds"]:
            trace = _trace(text, name, seed)
            for scale in spec.axes["rate_scale"]:
                try:
                    scaled = trace.rate_scaled(scale)
                    for shape in spec.axes["burstiness"]:
                        if shape is not None:
                            scaled.gamma_arrivals(shape, seed)
                except NightjarInputError as exc:
                    raise NightjarInputError(
                        f"--rate-scale {scale:g} on trace {name}: {exc}") from None
            for (pname, _, _), cell in fits.items():
                cfg = settle(cell.run_config(), profiles[pname], checked=True).knobs
                try:
                    servable(trace, profiles[pname], cfg, OnUnfit(spec.on_unfit))
                except NightjarInputError as exc:
                    seeded = f" (seed {seed})" if len(spec.axes["seeds"]) > 1 else ""
                    raise NightjarInputError(
                        f"trace {name}{seeded} on profile {pname}: {exc}") from None


def _check_cells(spec: SweepSpec, profiles: dict[str, Any]) -> None:
    """Every cell's settings and policy, built once per distinct combination, so that a
    bad value anywhere fails before the first cell runs."""
    from nightjar.core.policy import PolicyEnv
    from nightjar.policies.registry import make_policy
    from nightjar.profile.priors import parse_prior
    from nightjar.run.prepare import settle

    for name, profile in profiles.items():
        for g in spec.axes["gamma_max"]:
            if g > profile.gamma_max:
                raise NightjarInputError(
                    f"--gamma-max {g} exceeds profile {name}'s table (gamma <= "
                    f"{profile.gamma_max})")
    seen: set[tuple[Any, ...]] = set()
    for cell in spec.cells():
        params = cell.params()
        ident = tuple(v for k, v in params.items() if k not in ("trace", "seed", "rate_scale"))
        if ident in seen:
            continue
        seen.add(ident)
        profile = profiles[cell.profile]
        try:
            config = settle(cell.run_config(), profile).config
        except NightjarInputError as exc:
            raise NightjarInputError(f"profile {cell.profile}: {exc}") from None
        # As the cell will build it: planning with its prior (``none``: no table).
        make_policy(cell.policy, PolicyEnv(gamma_max=config.gamma_max,
                                           latency=parse_prior(config.prior, profile),
                                           truth=profile, drafter=profile.drafter))


# Cells between two calls of plan()'s progress callback (a key costs ~0.1 ms).
PLAN_EVERY = 2000


def plan(spec: SweepSpec, progress: Callable[[int, int], None] | None = None,
         command: str = "") -> list[CellTask]:
    """Every cell of the grid with its key and input texts (validating all inputs);
    ``progress(planned, total)`` follows a large grid's planning; ``command``: what
    each cell's row records as the command that computed it."""
    from nightjar.policies.registry import expand_specs
    from nightjar.profile.profile import load_profile
    from nightjar.sweep.spec import with_axis

    spec = with_axis(spec, "policy", expand_specs(list(spec.axes["policy"])))
    traces = {name: _trace_text(name) for name in spec.axes["trace"]}
    profiles = {name: load_profile(name) for name in spec.axes["profile"]}
    _check_cells(spec, profiles)
    _check_inputs(spec, traces, profiles)
    profile_texts = {n: json.dumps(p.to_json(), sort_keys=True) for n, p in profiles.items()}
    digests = {t: digest(t) for t in [*traces.values(), *profile_texts.values()]}
    tasks = []
    total = spec.num_cells()
    for cell in spec.cells():
        trace_text, profile_text = traces[cell.trace], profile_texts[cell.profile]
        key = cell.key(digests[trace_text], digests[profile_text])
        tasks.append(CellTask(cell, key, trace_text, profile_text, command))
        if progress is not None and len(tasks) % PLAN_EVERY == 0:
            progress(len(tasks), total)
    return tasks


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def run_sweep(
    spec: SweepSpec,
    out: Path,
    *,
    jobs: int = 1,
    ray: str | None = None,
    force: bool = False,
    config: Path | None = None,
    report: bool = True,
    on_cell: Callable[[int, int], None] | None = None,
    on_plan: Callable[[int, int], None] | None = None,
    command: str | None = None,
) -> SweepOutcome:
    """Run (or resume) ``spec`` into ``out``; ``on_cell(done, total)`` follows progress,
    ``on_plan(planned, total)`` the planning of a large grid before it; ``command`` is
    what the computed cells record as their command (default: this process's)."""
    tasks = plan(spec, on_plan, command if command is not None else command_line())
    shown = Path(out)
    with holding(check_out_dir(shown, force=True), shown):
        return _run_locked(spec, tasks, shown, jobs=jobs, ray=ray, force=force, config=config,
                           report=report, on_cell=on_cell)


def _run_locked(
    spec: SweepSpec,
    tasks: list[CellTask],
    out: Path,
    *,
    jobs: int,
    ray: str | None,
    force: bool,
    config: Path | None,
    report: bool,
    on_cell: Callable[[int, int], None] | None,
) -> SweepOutcome:
    copies = config is not None and not _same_file(config, Path(out) / "experiment.toml")
    out = prepare_sweep_dir(Path(out), force, config_copy=copies)
    write_atomic(out / SPEC_FILE, json.dumps(spec.to_json(), indent=1) + "\n")
    if config is not None and copies:
        try:
            shutil.copyfile(config, out / "experiment.toml")
        except OSError as exc:
            raise NightjarInputError(f"cannot copy {config}: {exc.strerror or exc}") from None
    rows: dict[str, dict[str, Any]] = {}
    todo: list[CellTask] = []
    for task in tasks:
        if task.key in rows:
            continue
        row = load_cell(out, task.key)
        if row is None:
            todo.append(task)
        else:
            rows[task.key] = row
    reused, total = len(rows), len({t.key for t in tasks})
    if on_cell is not None:
        on_cell(reused, total)

    failed: list[tuple[dict[str, Any], str]] = []

    def done(task: CellTask, row: dict[str, Any] | None, error: str | None) -> None:
        if row is None:
            failed.append((task.cell.params(), error or "failed"))
        else:
            save_cell(out, task.key, task.cell.params(), row)
            rows[task.key] = row
        if on_cell is not None:
            on_cell(len(rows) + len(failed), total)

    run_tasks(todo, jobs=jobs, ray=ray, done=done)
    # The full-system regret is across cells: each against its group's static cells.
    axes = Cell.columns()
    finished = add_to_rows([rows[t.key] for t in tasks if t.key in rows], axes)
    frame = table_frame(finished)
    paths = write_table(out, finished)
    if report and finished:
        from nightjar.sweep.report import write_sweep_report

        paths.append(write_sweep_report(frame, out / "report.html", title=f"sweep {out.name}"))
    return SweepOutcome(frame=frame, computed=len(todo) - len(failed), reused=reused,
                        paths=paths, failed=failed)
