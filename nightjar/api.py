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

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import pandas as pd

from nightjar.config import RunConfig
from nightjar.core.records import RunResult
from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError
from nightjar.profile.model import DEFAULT_PROFILE, Profile, load_profile
from nightjar.results.metrics import Summary
from nightjar.results.regret import Regret, Yardsticks
from nightjar.results.run_set import ResultSet
from nightjar.trace.model import Trace, load_trace


class Results(Sequence[RunResult]):
    """The runs of one comparison (same trace, same seed), with their SLO.

    A sequence of :class:`~nightjar.core.records.RunResult`; ``results["fixed:3"]`` picks a
    run by policy. An ``oracle`` run among them is the yardstick for regret. The
    summaries and regrets are computed once, in the :class:`~nightjar.results.run_set.ResultSet`
    the CLI hands to its table, CSVs and report.
    """

    def __init__(self, runs: Sequence[RunResult], slo: Slo | None = None,
                 title: str = "") -> None:
        self.runs = list(runs)
        self.slo = slo or Slo()
        self.title = title or (f"{self.runs[0].trace} on {self.runs[0].profile}"
                               if self.runs else "nightjar run")
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

    def result_set(self) -> ResultSet:
        """The :class:`~nightjar.results.run_set.ResultSet` of these runs (built once)."""
        if self._set is None:
            self._set = ResultSet.build(self.runs, title=self.title, slo=self.slo)
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
        """Regret vs the bound and gain vs the best static run, by policy."""
        return self.result_set().yardsticks

    def frame(self) -> pd.DataFrame:
        return results_frame(self)

    def figure(self) -> Any:
        """The runs over time (arrivals, batch, throughput, step time, acceptance) on
        one time axis: a plotly Figure, as in the report's "Over time" section."""
        from nightjar.report.fig_time import time_figure
        from nightjar.report.series import span_of, time_series
        from nightjar.report.style import policy_colors

        runs = self.result_set().first_seed()
        span = span_of([r.result for r in runs])
        series = {r.policy: time_series(r.result, span) for r in runs}
        return time_figure(runs, series, policy_colors([r.policy for r in runs]), span)

    def comparison_figures(self) -> list[Any]:
        """Throughput, latency and goodput bars, the regret curves (with an oracle run)
        and the latency ECDFs, as in the report."""
        from nightjar.report.fig_compare import bars_figure, regret_figure
        from nightjar.report.fig_latency import latency_figure
        from nightjar.report.style import policy_colors

        rs = self.result_set()
        runs = rs.first_seed()
        colors = policy_colors([r.policy for r in runs])
        figs = [bars_figure(runs, colors, rs.slo), regret_figure(rs, colors),
                latency_figure(runs, colors, rs.slo)]
        return [f for f in figs if f is not None]

    def write(self, out: str | Path, *, force: bool = False, report: bool = True) -> Path:
        """CSVs, summaries and (by default) the HTML report, as ``nightjar sim --out``."""
        from nightjar.report.folder import write_all

        write_all(self.result_set(), Path(out), force=force, report=report)
        return Path(out)


_D = RunConfig()  # the defaults every entry point shares (nightjar.config)


def simulate(
    trace: Trace | str,
    profile: Profile | str | None = None,
    policies: str | Sequence[str] | None = None,
    *,
    seed: int = _D.seed,
    gamma_max: int = _D.gamma_max,
    prior: str = _D.prior,
    draft_kv: str = _D.draft_kv,
    acceptance: str = _D.acceptance,
    offload: bool = _D.offload,
    reload: str = _D.reload,
    engine: str = _D.engine,
    max_num_seqs: int = _D.max_num_seqs,
    max_num_batched_tokens: int = _D.max_num_batched_tokens,
    max_model_len: int | None = _D.max_model_len,
    on_unfit: str = _D.on_unfit,
    oracle: bool = _D.oracle,
    slo_ttft: float = _D.slo_ttft,
    slo_tpot: float = _D.slo_tpot,
) -> Results:
    """Run ``policies`` over ``trace`` on ``profile`` in the simulator.

    ``trace`` and ``profile`` are objects or bundled names / paths; ``policies`` one
    spec or several (default: the ``nightjar sim`` set). Every policy sees the same
    arrivals and per-request acceptance rates; deterministic for ``seed``. The other
    settings are ``nightjar sim``'s flags, with the same defaults
    (:class:`nightjar.config.RunConfig`); as there, the oracle runs unless
    ``oracle=False``, and its run gives the frame its ``step_oracle_pct`` column;
    every simulated run carries ``regret_bound_pct`` (:mod:`nightjar.results.regret`).
    """
    from nightjar.sim import OnUnfit, check_policies, simulate_many

    specs: tuple[str, ...] = _D.policies
    if isinstance(policies, str):
        specs = (policies,)
    elif policies is not None:
        specs = tuple(policies)
    config = RunConfig.build({
        "policies": specs, "seed": seed, "gamma_max": gamma_max, "prior": prior,
        "draft_kv": draft_kv, "acceptance": acceptance, "offload": offload, "reload": reload,
        "engine": engine, "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": max_num_batched_tokens, "max_model_len": max_model_len,
        "on_unfit": on_unfit, "oracle": oracle, "slo_ttft": slo_ttft, "slo_tpot": slo_tpot,
    })
    tr = load_trace(trace) if isinstance(trace, str) else trace
    prof = load_profile(profile or DEFAULT_PROFILE) if not isinstance(profile, Profile) else profile
    config.check_profile(prof)
    cfg = config.sim_config()
    runs = config.specs()
    check_policies(runs, tr, prof, cfg)
    results = simulate_many(tr, prof, runs, cfg, on_unfit=OnUnfit(config.on_unfit),
                            prior=config.prior)
    return Results(results, config.slo())


def results_frame(
    results: Results | RunResult | Sequence[RunResult], slo: Slo | None = None
) -> pd.DataFrame:
    """A pandas DataFrame of summaries: one row per run, every summary column
    (``throughput_tok_s``, ``ttft_s_p99``, ``goodput_req_s``, ``slo_attainment``, ...),
    and the yardstick columns (``regret_bound_pct``, ``gain_static_pct`` against
    ``static_yardstick``, ``step_oracle_pct`` with an oracle run)."""
    from nightjar.results.write import summary_row

    if isinstance(results, RunResult):
        results = [results]
    res = results if isinstance(results, Results) else Results(list(results), slo)
    if slo is not None and slo != res.slo:
        res = Results(res.runs, slo)
    return pd.DataFrame([summary_row(run) for run in res.result_set().runs])


def load_run(folder: str | Path) -> Results:
    """Read back what ``nightjar sim --out`` or ``nightjar live --out`` wrote: the whole
    folder (every policy) or one policy's sub-folder. A sweep folder is a table, not
    runs: read it with :func:`load_sweep`."""
    from nightjar.results.read import read_run_folder

    folder = Path(folder)
    if (folder / "sweep.json").is_file():
        raise NightjarInputError(f"{folder} is a sweep: read it with nightjar.load_sweep")
    if not folder.is_dir():
        raise NightjarInputError(f"{folder} is not a folder")
    if _is_run(folder):
        read = [read_run_folder(folder)]
    else:
        subs = sorted(p for p in folder.iterdir() if p.is_dir() and _is_run(p))
        if not subs:
            raise NightjarInputError(f"{folder} holds no nightjar run (no summary.json)")
        read = [read_run_folder(p) for p in _in_summary_order(folder, subs)]
    slos = {slo for _, slo in read}
    return Results([run for run, _ in read], slos.pop() if len(slos) == 1 else None)


def _is_run(folder: Path) -> bool:
    return (folder / "summary.json").is_file()


def _in_summary_order(folder: Path, subs: list[Path]) -> list[Path]:
    """Sub-folders in the order of the folder's summary table (the run's policy order)."""
    for name in ("summary.csv", "summary.parquet"):
        path = folder / name
        if path.is_file():
            try:
                table = pd.read_csv(path) if name.endswith("csv") else pd.read_parquet(path)
            except (OSError, ValueError, ImportError):
                break
            order = {str(s): k for k, s in enumerate(table.get("slug", []))}
            return sorted(subs, key=lambda p: order.get(p.name, len(order)))
    return subs


def load_sweep(folder: str | Path) -> pd.DataFrame:
    """The table of a ``nightjar sweep`` folder: one row per cell."""
    from nightjar.sweep.store import load_table

    return load_table(Path(folder))


def sweep_figures(frame: pd.DataFrame) -> list[Any]:
    """Load-latency, throughput/goodput and SLO attainment curves of a sweep table, with
    95% bands across seeds (plotly Figures)."""
    from nightjar.sweep.figures import sweep_figures as figures

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
    from nightjar.sweep.run import run_sweep as run
    from nightjar.sweep.spec import build_spec

    spec = build_spec(grid, source="run_sweep")
    return run(spec, Path(out), jobs=jobs, ray=ray, force=force, report=report).frame
