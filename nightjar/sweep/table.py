"""A tuned batch-size -> K table for stock vLLM, searched in the simulator.

vLLM 0.32 has its own Dynamic SD table, ``speculative_config.
num_speculative_tokens_per_batch_size``: a list of inclusive ``[start, end, K]``
batch-size ranges starting at 1 (``vllm/v1/spec_decode/dynamic/utils.py``), looked
up by the number of requests a step schedules. Operators who cannot swap vLLM's
scheduler can still set it. :func:`search_table` finds a good one for a profile,
its drafter and a load (a trace):

1. buckets: batch-size ranges with the given lower edges (powers of two by default);
2. start: per bucket, the K that minimises the profile's predicted time per token at
   the bucket's middle batch, ``T(B, K, c) / tau(K)``, with the workload's prior
   acceptance and the trace's mean context (the geometric law of the simulator);
3. coordinate descent in the simulator: bucket by bucket (the ones the trace's
   steps reach), every K in ``0..gamma_max``, keeping the best by the metric, for
   ``passes`` passes or until nothing improves; runs on the search seed only.

:func:`compare` then evaluates the table, ``nightjar+`` and every fixed K on
held-out seeds (the search never saw their acceptance draws), with 95% intervals:
a claim that one beats another holds only where the intervals separate.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from nightjar.core.estimators import expected_tokens
from nightjar.errors import NightjarInputError
from nightjar.results.stats import Interval, mean_interval

if TYPE_CHECKING:  # the simulator (simpy) loads when a search runs, not for --help
    from nightjar.profile.profile import Profile
    from nightjar.sim import SimConfig
    from nightjar.trace.trace import Trace

# metric -> (Summary reader, True when larger is better, label)
METRICS: dict[str, tuple[Callable[..., float], bool, str]] = {
    "e2e": (lambda s: s.e2e_s.mean, False, "mean E2E s"),
    "tpot": (lambda s: s.tpot_s.mean, False, "mean TPOT s"),
    "ttft": (lambda s: s.ttft_s.mean, False, "mean TTFT s"),
    "throughput": (lambda s: s.throughput_tok_s, True, "tok/s"),
    "goodput": (lambda s: s.goodput_req_s, True, "goodput req/s"),
}
DEFAULT_EDGES = (1, 2, 4, 8, 16, 32, 64, 128, 256)

Row = tuple[int, int, int]  # (first batch size, last batch size, K), inclusive


@dataclass(frozen=True, slots=True)
class TableSearch:
    profile: Profile
    trace: Trace
    config: SimConfig
    metric: str = "e2e"
    edges: tuple[int, ...] = DEFAULT_EDGES
    passes: int = 2

    def __post_init__(self) -> None:
        if self.metric not in METRICS:
            raise NightjarInputError(f"--metric {self.metric!r}: choose from {', '.join(METRICS)}")
        if not self.edges or self.edges[0] != 1 or list(self.edges) != sorted(set(self.edges)):
            raise NightjarInputError(
                f"--buckets must be increasing batch sizes starting at 1, got {list(self.edges)}"
            )
        if self.passes < 1:
            raise NightjarInputError(f"--passes must be >= 1, got {self.passes}")
        if self.config.gamma_max > self.profile.gamma_max:
            raise NightjarInputError(
                f"--gamma-max {self.config.gamma_max} exceeds the profile's table "
                f"(gamma <= {self.profile.gamma_max})"
            )

    @property
    def max_batch(self) -> int:
        return self.config.max_num_seqs

    def buckets(self) -> list[tuple[int, int]]:
        top = self.max_batch
        lows = [e for e in self.edges if e <= top]
        highs = [e - 1 for e in lows[1:]] + [top]
        return list(zip(lows, highs, strict=True))


@dataclass
class SearchResult:
    rows: list[Row]
    value: float  # the metric on the search seed
    runs: int  # simulator runs the search took
    history: list[tuple[str, float]] = field(default_factory=list)


def policy_spec(rows: Sequence[Row]) -> str:
    """The simulator's ``schedule:`` policy running this table."""
    return "schedule:" + ",".join(f"{lo}-{hi}:{k}" for lo, hi, k in rows)


def vllm_table(rows: Sequence[Row]) -> list[list[int]]:
    """vLLM's ``num_speculative_tokens_per_batch_size``: adjacent equal K merged."""
    out: list[list[int]] = []
    for lo, hi, k in rows:
        if out and out[-1][2] == k:
            out[-1][1] = hi
        else:
            out.append([lo, hi, k])
    return out


def _mean_context(trace: Trace) -> float:
    prompts, outputs = trace.prompt_tokens, trace.output_tokens
    n = len(prompts)
    return float(sum(int(p) + int(o) / 2 for p, o in zip(prompts, outputs, strict=True)) / n)


def analytic_rows(search: TableSearch) -> list[Row]:
    """Per bucket, the K with the least predicted time per token (the start)."""
    from nightjar.sim.runner import acceptance_prior

    p, g_max = search.profile, search.config.gamma_max
    alpha = acceptance_prior(search.trace, p) or 0.6
    ctx = _mean_context(search.trace)
    rows = []
    for lo, hi in search.buckets():
        b = max(lo, round(math.sqrt(lo * hi)))
        cost = [p.step_time_s(b, g, ctx) / expected_tokens(alpha, g) for g in range(g_max + 1)]
        rows.append((lo, hi, min(range(g_max + 1), key=cost.__getitem__)))
    return rows


def run_metric(search: TableSearch, spec: str, seed: int) -> float:
    from nightjar.results.metrics import summarize
    from nightjar.sim import simulate

    result = simulate(search.trace, search.profile, spec, replace(search.config, seed=seed))
    read, _, _ = METRICS[search.metric]
    return float(read(summarize(result)))


def _better(search: TableSearch, a: float, b: float) -> bool:
    """Whether ``a`` beats ``b`` (strictly) by the metric."""
    larger = METRICS[search.metric][1]
    return a > b if larger else a < b


def _occupied(search: TableSearch, rows: list[Row], seed: int) -> set[int]:
    """Indices of the buckets the trace's steps reach under ``rows``."""
    from nightjar.sim import simulate

    result = simulate(search.trace, search.profile, policy_spec(rows),
                      replace(search.config, seed=seed))
    sizes = {s.batch_size for s in result.steps if s.batch_size > 0}
    return {i for i, (lo, hi, _) in enumerate(rows) if any(lo <= b <= hi for b in sizes)}


def search_table(
    search: TableSearch, seed: int, progress: Callable[[str], None] | None = None
) -> SearchResult:
    """Coordinate descent over the buckets' K from the analytic start (see module doc)."""
    say = progress or (lambda _m: None)
    rows = analytic_rows(search)
    best = run_metric(search, policy_spec(rows), seed)
    runs = 1
    history = [(policy_spec(rows), best)]
    reached = sorted(_occupied(search, rows, seed))
    runs += 1
    for n in range(search.passes):
        improved = False
        for i in reached:
            lo, hi, k0 = rows[i]
            for k in range(search.config.gamma_max + 1):
                if k == k0:
                    continue
                trial = [*rows[:i], (lo, hi, k), *rows[i + 1:]]
                value = run_metric(search, policy_spec(trial), seed)
                runs += 1
                history.append((policy_spec(trial), value))
                if _better(search, value, best):
                    rows, best, improved = trial, value, True
            say(f"pass {n + 1}, batch {lo}-{hi}: K = {rows[i][2]} ({best:.4g})")
        if not improved:
            break
    return SearchResult(rows, best, runs, history)


@dataclass(frozen=True, slots=True)
class Contender:
    name: str
    spec: str
    value: Interval


def compare(
    search: TableSearch, rows: Sequence[Row], seeds: Sequence[int]
) -> tuple[Contender, Contender, Contender, list[Contender]]:
    """(table, nightjar+, best fixed K, every fixed K) on ``seeds``, means with 95% CIs."""

    def run(name: str, spec: str) -> Contender:
        return Contender(name, spec, mean_interval([run_metric(search, spec, s) for s in seeds]))

    table = run("tuned table", policy_spec(rows))
    plus = run("nightjar+", "nightjar+")
    fixed = [run(f"fixed:{k}", f"fixed:{k}") for k in range(search.config.gamma_max + 1)]
    larger = METRICS[search.metric][1]
    best = max(fixed, key=lambda c: c.value.mean if larger else -c.value.mean)
    return table, plus, best, fixed
