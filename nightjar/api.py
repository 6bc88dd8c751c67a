"""The Python API: simulate in memory, read any run back, summaries as DataFrames.

Documented with a runnable example in docs/api.md (executed by tests/test_api_doc.py)::

    import nightjar
    from nightjar import Trace

    trace = Trace.from_segments([(4, 30), (20, 30)], workload="alpaca", seed=1)
    results = nightjar.simulate(trace, "a100-80gb/vicuna-13b+vicuna-68m",
                                ["nospec", "fixed:3", "nightjar+"], slo_ttft=1.0)
    frame = nightjar.results_frame(results)     # one row per policy
    fig = results.figure()                      # plotly: fig.show() in a notebook

Figures are plotly objects; nothing here writes a file unless asked (``Results.write``).
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import pandas as pd

from nightjar.core.records import RunResult
from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError
from nightjar.profile.profile import DEFAULT_PROFILE, Profile, load_profile
from nightjar.results.alternatives import AltRegret
from nightjar.results.metrics import Summary
from nightjar.results.regret import Regret, Yardsticks
from nightjar.results.run_set import ResultSet
from nightjar.run.config import RunConfig
from nightjar.trace.trace import Trace, load_trace


class Results(Sequence[RunResult]):
    """The runs of one comparison (same trace; one seed or several), with their SLO.

    A sequence of :class:`~nightjar.core.records.RunResult`; ``results["fixed:3"]`` picks a
    run by policy (its first seed). An ``oracle`` run among them is the yardstick for
    regret, taken seed by seed. The summaries and regrets are computed once, in the
    :class:`~nightjar.results.run_set.ResultSet` the CLI hands to its table, CSVs and
    report. Read back from a sweep folder, it holds no runs but the sweep's ``table``
    (one row per cell), which :func:`results_frame` returns.
    """

    def __init__(self, runs: Sequence[RunResult], slo: Slo | None = None,
                 title: str = "", *, table: pd.DataFrame | None = None,
                 gamma_max: int | None = None, offload: bool | None = None,
                 movable: bool | None = None) -> None:
        if isinstance(runs, str | bytes) or not isinstance(runs, Sequence | Iterator):
            raise NightjarInputError(f"Results takes a list of runs, got {type(runs).__name__}")
        self.runs = list(runs)
        bad = [r for r in self.runs if not isinstance(r, RunResult)]
        if bad:
            raise NightjarInputError(
                f"Results takes runs (nightjar.core.records.RunResult), got {_short(bad[0])}")
        if slo is not None and not isinstance(slo, Slo):
            raise NightjarInputError(f"slo must be a nightjar Slo or None, got {_short(slo)}")
        if not isinstance(title, str):
            raise NightjarInputError(f"title must be a string, got {_short(title)}")
        self.slo = slo or Slo()
        self.title = title or (f"{self.runs[0].trace} on {self.runs[0].profile}"
                               if self.runs else "nightjar run")
        self.table = table
        # What the run set's yardsticks need to say which alternatives are missing.
        self.gamma_max, self.offload, self.movable = gamma_max, offload, movable
        self._set: ResultSet | None = None

    @overload
    def __getitem__(self, index: int) -> RunResult: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[RunResult]: ...
    @overload
    def __getitem__(self, index: str) -> RunResult: ...

    def __getitem__(self, index: int | slice | str) -> RunResult | Sequence[RunResult]:
        if isinstance(index, str):
            for run in self.runs:
                if run.policy == index:
                    return run
            raise KeyError(index)
        return self.runs[index]

    def __len__(self) -> int:
        return len(self.runs)

    def __iter__(self) -> Iterator[RunResult]:
        return iter(self.runs)

    def __repr__(self) -> str:
        return f"Results({', '.join(r.policy for r in self.runs)})"

    def __add__(self, other: object) -> Results:
        """Both sets' runs side by side (``on + off``), for one frame or report; a policy
        that appears in both keeps both runs, told apart by their provenance columns.
        Settings that only one side knows (gamma_max, offload) are dropped where the two
        disagree."""
        if not isinstance(other, Results):
            return NotImplemented
        if self.table is not None or other.table is not None:
            raise NightjarInputError("a sweep's Results hold a table, not runs: concatenate"
                                     " the frames (pandas.concat) instead")

        def same(a: Any, b: Any) -> Any:
            return a if a == b else None

        return Results([*self.runs, *other.runs], self.slo if self.slo == other.slo else None,
                       f"{self.title} + {other.title}",
                       gamma_max=same(self.gamma_max, other.gamma_max),
                       offload=same(self.offload, other.offload),
                       movable=same(self.movable, other.movable))

    def result_set(self) -> ResultSet:
        """The :class:`~nightjar.results.run_set.ResultSet` of these runs (built once)."""
        if self.table is not None:
            raise NightjarInputError(
                "a sweep keeps one summary row per cell, not its runs: use results_frame,"
                " or nightjar sim --out for per-request records"
            )
        if self._set is None:
            self._set = ResultSet.build(self.runs, title=self.title, slo=self.slo,
                                        gamma_max=self.gamma_max, offload=self.offload,
                                        movable=self.movable)
        return self._set

    @property
    def oracle(self) -> RunResult | None:
        return self.result_set().oracle

    def summaries(self) -> list[Summary]:
        """One :class:`~nightjar.results.metrics.Summary` per run."""
        return self.result_set().summaries

    def regrets(self) -> dict[str, Regret] | None:
        """Per-token latency against the per-step oracle run (a reference, not a bound)."""
        return self.result_set().regrets

    def yardsticks(self) -> dict[str, Yardsticks]:
        """The conditional bound's regret and gain vs the best static run, by policy."""
        return self.result_set().yardsticks

    def alternatives(self) -> dict[str, dict[str, AltRegret]]:
        """By policy and user metric, regret against the best static alternative of the
        same seed (:mod:`nightjar.results.alternatives`)."""
        return self.result_set().alternatives

    def frame(self, per: str = "run") -> pd.DataFrame:
        """:func:`results_frame` of these runs (``per`` = run, request or step)."""
        return results_frame(self, per=per)

    def figure(self) -> Any:
        """The runs over time (arrivals, batch, throughput, step time, acceptance, KV use)
        on one time axis: a plotly Figure, as in the report's "Over time" section."""
        from nightjar.report.colors import policy_colors
        from nightjar.report.fig_decision import focus_policy
        from nightjar.report.fig_time import time_figure
        from nightjar.report.series import span_of, time_series

        runs = self.result_set().first_seed()
        span = span_of([r.result for r in runs])
        series = {r.policy: time_series(r.result, span) for r in runs}
        return time_figure(runs, series, policy_colors([r.policy for r in runs]), span,
                           focus_policy(runs))

    def decision_figure(self) -> Any:
        """Each policy's gamma against batch size and over time on the trace's load, side
        by side (the report's "How each policy chose gamma"); None when every policy ran
        one gamma throughout."""
        from nightjar.report.colors import policy_colors
        from nightjar.report.fig_decision import decision_figure
        from nightjar.report.series import max_batch, span_of, time_series

        rs = self.result_set()
        runs = rs.first_seed()
        span = span_of([r.result for r in runs])
        series = {r.policy: time_series(r.result, span) for r in runs}
        used = max(max((s.gamma for s in r.result.steps), default=0) for r in runs)
        return decision_figure(runs, series, policy_colors([r.policy for r in runs]),
                               span_s=span, gamma_max=max(1, used, rs.gamma_max or 0),
                               batch_top=max_batch([r.result for r in runs]))

    def comparison_figures(self) -> list[Any]:
        """Throughput, latency and goodput bars, the regret curves (with an oracle run)
        and the latency ECDFs, as in the report."""
        from nightjar.report.colors import policy_colors
        from nightjar.report.fig_compare import bars_figure, regret_figure
        from nightjar.report.fig_latency import latency_figure

        rs = self.result_set()
        runs = rs.first_seed()
        colors = policy_colors([r.policy for r in runs])
        figs = [bars_figure(runs, colors, rs.slo), regret_figure(rs, colors),
                latency_figure(runs, colors, rs.slo)]
        return [f for f in figs if f is not None]

    def write(self, out: str | Path, *, force: bool = False, report: bool = True) -> Path:
        """CSVs, summaries and (by default) the HTML report, as ``nightjar sim --out``."""
        from nightjar.checks import boolean
        from nightjar.reading import as_path
        from nightjar.report.folder import write_all
        from nightjar.results.outdir import staged_out_dir

        force, report = boolean(force, "force"), boolean(report, "report")
        path = as_path(out, "out")
        with staged_out_dir(path, force) as tmp:
            write_all(self.result_set(), tmp, force=True, report=report)
        return path


_D = RunConfig()  # the defaults every entry point shares (nightjar.run.config)


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def trace_arg(trace: Any) -> Trace:
    """A :class:`Trace`, or the trace a bundled name or a path names."""
    if isinstance(trace, Trace):
        return trace
    if isinstance(trace, str | os.PathLike):
        return load_trace(trace)
    raise NightjarInputError(
        f"trace must be a Trace, a bundled trace name or a path, got {_short(trace)}")


def profile_arg(profile: Any) -> Profile:
    """A :class:`Profile` (None: the default one), or the one a name or a path names."""
    if profile is None:
        return load_profile(DEFAULT_PROFILE)
    if isinstance(profile, Profile):
        return profile
    if isinstance(profile, str | os.PathLike):
        return load_profile(profile)
    raise NightjarInputError(
        f"profile must be a Profile, a bundled profile name or a path, got {_short(profile)}")


def simulate(
    trace: Trace | str,
    profile: Profile | str | None = None,
    policies: str | Sequence[str] | None = None,
    **settings: Any,
) -> Results:
    """Run ``policies`` over ``trace`` on ``profile`` in the simulator.

    ``trace`` and ``profile`` are objects or bundled names / paths; ``policies`` one
    spec or several (default: the ``nightjar sim`` set). Every policy sees the same
    arrivals and per-request acceptance rates; deterministic for ``seed``. The other
    settings are keyword arguments, ``nightjar sim``'s flags with the same names and
    defaults (the fields of :class:`nightjar.run.config.RunConfig`, listed in this
    function's signature; ``rate_scale`` multiplies the trace's request rate). As
    there, ``gamma_max`` left out follows a profile whose table stops below the
    default, the oracle runs unless ``oracle=False`` and its run gives the frame its
    ``step_oracle_pct`` column, and every simulated run carries ``regret_bound_pct``
    (:mod:`nightjar.results.regret`).
    """
    from nightjar.results.provenance import api_call_site
    from nightjar.run.prepare import prepare

    specs: tuple[str, ...] = _D.policies
    if isinstance(policies, str):
        specs = (policies,)
    elif isinstance(policies, list | tuple):
        specs = tuple(policies)
    elif policies is not None:
        raise NightjarInputError(
            f"policies must be a policy spec or a list of them, got {_short(policies)}")
    gamma_given = settings.get("gamma_max") is not None
    values = {k: v for k, v in settings.items() if k != "gamma_max" or gamma_given}
    config = RunConfig.build({**values, "policies": specs})
    run = prepare(config, trace_arg(trace), profile_arg(profile), gamma_given=gamma_given)
    return Results(run.simulate(command=api_call_site()), run.config.slo(),
                   gamma_max=run.config.gamma_max, offload=run.knobs.offload,
                   movable=run.movable)


def _settings_signature() -> inspect.Signature:
    """``simulate``'s signature with one keyword per setting, from RunConfig's fields, so
    ``help(nightjar.simulate)`` and editors list them without a second spelling."""
    head = list(inspect.signature(simulate).parameters.values())[:3]
    # Spellings the API takes beyond the field's type: gamma_max None (not given),
    # offload as a boolean.
    hints = {**typing.get_type_hints(RunConfig), "gamma_max": int | None, "offload": str | bool}
    keywords = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, annotation=hints[f.name],
                          default=None if f.name == "gamma_max" else f.default)
        for f in dataclasses.fields(RunConfig) if f.name != "policies"
    ]
    return inspect.Signature([*head, *keywords],
                             return_annotation=inspect.signature(simulate).return_annotation)


simulate.__dict__["__signature__"] = _settings_signature()


def results_frame(
    results: Results | RunResult | Sequence[RunResult], slo: Slo | None = None,
    per: str = "run",
) -> pd.DataFrame:
    """A pandas DataFrame of the runs, in long form.

    ``per="run"`` (default): one row per run, every summary column
    (``throughput_tok_s``, ``ttft_s_p99``, ``goodput_req_s``, ``slo_attainment``,
    ``gamma_switches``, ...) and the yardstick columns (``regret_bound_pct``,
    ``gain_static_pct`` against ``static_yardstick``, ``step_oracle_pct`` with an
    oracle run); for a sweep read back by :func:`load_run`, its table.
    ``per="request"``: one row per request of every run (``ttft_s``, ``tpot_s``,
    ``e2e_s``, ...); ``per="step"``: one row per engine step. Every row names its run
    (``policy``, ``engine``, ``trace``, ``profile``, ``seed``), so
    ``px.ecdf(results_frame(r, per="request"), x="tpot_s", color="policy")`` draws
    without glue. Counts are ints.
    """
    from nightjar.results.frames import PER, request_frame, step_frame
    from nightjar.results.write import summary_row

    if slo is not None and not isinstance(slo, Slo):
        raise NightjarInputError(
            f"slo must be a nightjar Slo (e.g. Slo(ttft_s=1, tpot_s=0.05)) or None, got "
            f"{_short(slo)}")
    if per not in PER:
        raise NightjarInputError(f"per must be one of {', '.join(PER)}, got {per!r}")
    if isinstance(results, RunResult):
        results = [results]
    if not isinstance(results, Results | list | tuple):
        raise NightjarInputError(
            f"results_frame takes the Results of simulate or load_run (or a list of runs), "
            f"got {_short(results)}")
    res = results if isinstance(results, Results) else Results(list(results), slo)
    if res.table is not None:
        if per != "run":
            raise NightjarInputError(
                f"a sweep keeps one summary row per cell, not per-{per} records"
            )
        return res.table.copy()
    if per == "request":
        return request_frame(res.runs)
    if per == "step":
        return step_frame(res.runs)
    if slo is not None and slo != res.slo:
        res = Results(res.runs, slo)
    return pd.DataFrame([summary_row(run) for run in res.result_set().runs])


def load_run(folder: str | Path) -> Results:
    """Read back what ``nightjar sim --out``, ``nightjar live --out`` or ``nightjar
    sweep --out`` wrote: a run folder (every policy its summary table lists), one
    policy's sub-folder, a ``--seeds N`` folder (every seed's runs, in seed order) or a
    sweep (its table, as ``Results.table``); CSV or parquet."""
    import re

    from nightjar.reading import as_path
    from nightjar.results.read import read_run_folder, run_folders

    path = as_path(folder, "load_run")
    if os.path.lexists(path / "sweep.json"):
        return Results([], None, f"sweep {path.name}", table=load_sweep(path))
    seeds = sorted(
        (int(m.group(1)), p) for p in (path.iterdir() if path.is_dir() else [])
        if p.is_dir() and (m := re.fullmatch(r"seed-(\d+)", p.name))
    )
    sets = [p for _, p in seeds] if seeds and not _is_run(path) else [path]
    read = [read_run_folder(p) for one in sets for p in run_folders(one)]
    slos = {slo for _, slo in read}
    return Results([run for run, _ in read], slos.pop() if len(slos) == 1 else None)


def _is_run(folder: Path) -> bool:
    return os.path.lexists(folder / "summary.json")


def load_sweep(folder: str | Path) -> pd.DataFrame:
    """The table of a ``nightjar sweep`` folder: one row per cell."""
    from nightjar.reading import as_path
    from nightjar.sweep.store import load_table

    return load_table(as_path(folder, "load_sweep"))


def sweep_figures(frame: pd.DataFrame) -> list[Any]:
    """Load-latency, throughput/goodput and SLO attainment curves of a sweep table, with
    95% bands across seeds (plotly Figures)."""
    from nightjar.sweep.figures import REQUIRED_COLUMNS
    from nightjar.sweep.figures import sweep_figures as figures

    if not isinstance(frame, pd.DataFrame):
        raise NightjarInputError(
            f"sweep_figures takes a sweep table (nightjar.load_sweep), got {_short(frame)}")
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing or frame.empty:
        raise NightjarInputError(
            "sweep_figures takes a sweep table (nightjar.load_sweep): "
            + (f"no column {missing[0]!r}" if missing else "it has no rows"))
    return figures(frame)


def run_sweep(
    out: str | Path,
    *,
    jobs: int = 1,
    ray: str | None = None,
    force: bool = False,
    report: bool = True,
    **grid: Any,
) -> pd.DataFrame:
    """Run (or resume) a sweep into ``out`` and return its table; ``grid`` takes the keys of
    a sweep TOML file (``trace``, ``rate_scale``, ``seeds``, ``policy``, ``profile``,
    ``offload``, ``reload``, ``gamma_max``, ``max_num_seqs``, ``slo_ttft``, ...)."""
    from nightjar.checks import boolean, integer
    from nightjar.reading import as_path
    from nightjar.results.provenance import api_call_site
    from nightjar.sweep.run import run_sweep as run
    from nightjar.sweep.spec import build_spec

    path = as_path(out, "out")
    jobs = integer(jobs, "jobs", lo=1)
    force, report = boolean(force, "force"), boolean(report, "report")
    if ray is not None and not isinstance(ray, str):
        raise NightjarInputError(f"ray must be auto, local or HOST:PORT, got {_short(ray)}")
    spec = build_spec(grid, source="run_sweep")
    return run(spec, path, jobs=jobs, ray=ray, force=force, report=report,
               command=api_call_site("nightjar.run_sweep")).frame
