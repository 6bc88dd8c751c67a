"""One run set's results, computed once: summaries and regrets travel with the runs.

The commands build a :class:`ResultSet` right after the engines finish and hand that
one object to the terminal table, the CSV writer and the HTML report, so that no
consumer summarizes a 150k-step run again or can disagree with another about it.

Runs are kept as a list of :class:`PolicyRun`; a policy may appear once per seed.
Each run carries its yardsticks (:mod:`nightjar.results.regret`): regret vs the bound
(from the run itself), gain vs the best static run and PTL vs the per-step oracle run
of the same seed and trace (when those ran), so several seeds per policy need no
change here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nightjar.core.records import RunResult
from nightjar.core.slo import Slo
from nightjar.results.alternatives import (
    AltRegret,
    against_alternatives,
    expected_alternatives,
    is_static,
    missing_alternatives,
)
from nightjar.results.metrics import Summary, summarize
from nightjar.results.regret import Regret, Yardsticks, regret, yardsticks
from nightjar.results.write import unique_slugs

ORACLE = "oracle"


@dataclass(frozen=True, slots=True)
class PolicyRun:
    """One policy's run on one seed with its summary and yardsticks."""

    result: RunResult
    summary: Summary
    regret: Regret | None  # vs the per-step oracle run, where one ran
    slug: str  # its folder name in the output (unique within the set)
    yardsticks: Yardsticks | None = None
    # Per user metric, against the best static alternative of the same seed and trace
    # (nightjar.results.alternatives); empty where no alternative ran.
    alternatives: dict[str, AltRegret] | None = None

    @property
    def policy(self) -> str:
        return self.result.policy

    @property
    def seed(self) -> int:
        return self.result.seed


@dataclass(frozen=True, slots=True)
class ResultSet:
    """Every run of one command, with what is derived from them, in run order."""

    runs: tuple[PolicyRun, ...]
    slo: Slo
    title: str
    # The longest speculation the engine allowed (the report's gamma axes); None:
    # unknown, the report uses the largest gamma any run used.
    gamma_max: int | None = None
    # Whether elastic draft memory was on (--offload); None: unknown. The report says
    # why no memory timeline is drawn when no run moved its draft.
    offload: bool | None = None
    # The alternatives a complete full-system comparison needs that the set did not
    # run (nightjar.results.alternatives); empty where unknown or complete.
    missing: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        results: Sequence[RunResult],
        *,
        title: str = "",
        slo: Slo | None = None,
        oracle_policy: str | None = ORACLE,
        gamma_max: int | None = None,
        offload: bool | None = None,
        movable: bool | None = None,
    ) -> ResultSet:
        """Summarize every run once and take regrets against the oracle runs.

        The oracle is the run named ``oracle_policy`` with the same seed (and trace)
        as the run; ``None`` means no regrets even if such a run exists. ``movable``:
        the drafter has weights elastic memory can move (with ``gamma_max`` and
        ``offload``, what tells which alternatives are missing).
        """
        slo = slo or Slo()
        oracles = {
            (r.seed, r.trace): r for r in results if oracle_policy and r.policy == oracle_policy
        }
        statics: dict[tuple[int, str], list[RunResult]] = {}
        for r in results:
            if is_static(r.policy):
                statics.setdefault((r.seed, r.trace), []).append(r)
        summaries = {id(r): summarize(r, slo) for r in results}
        runs = []
        for result, slug in zip(results, unique_slugs(results), strict=True):
            key = (result.seed, result.trace)
            oracle = oracles.get(key)
            alts = [summaries[id(r)] for r in statics.get(key, [])]
            # A run that is its set's only alternative has nothing to be measured against.
            if all(r is result for r in statics.get(key, [])):
                alts = []
            runs.append(
                PolicyRun(
                    result=result,
                    summary=summaries[id(result)],
                    regret=regret(result, oracle) if oracle is not None else None,
                    slug=slug,
                    yardsticks=yardsticks(result, statics.get(key, [])),
                    alternatives=against_alternatives(summaries[id(result)], alts)
                    if alts else None,
                )
            )
        missing: list[str] = []
        if gamma_max is not None and offload is not None and movable is not None:
            missing = missing_alternatives(
                [r.policy for r in results], expected_alternatives(gamma_max, offload, movable))
        return cls(tuple(runs), slo, title, gamma_max, offload, tuple(missing))

    @property
    def results(self) -> list[RunResult]:
        return [r.result for r in self.runs]

    @property
    def summaries(self) -> list[Summary]:
        return [r.summary for r in self.runs]

    @property
    def regrets(self) -> dict[str, Regret] | None:
        """Regret by policy spec (first seed of each), or None when no oracle ran."""
        out: dict[str, Regret] = {}
        for run in self.runs:
            if run.regret is not None:
                out.setdefault(run.policy, run.regret)
        return out or None

    @property
    def yardsticks(self) -> dict[str, Yardsticks]:
        """Yardsticks by policy spec (first seed of each)."""
        out: dict[str, Yardsticks] = {}
        for run in self.runs:
            if run.yardsticks is not None:
                out.setdefault(run.policy, run.yardsticks)
        return out

    @property
    def alternatives(self) -> dict[str, dict[str, AltRegret]]:
        """Regret against the best alternative per metric, by policy (first seed)."""
        out: dict[str, dict[str, AltRegret]] = {}
        for run in self.runs:
            if run.alternatives is not None:
                out.setdefault(run.policy, run.alternatives)
        return out

    @property
    def oracle(self) -> RunResult | None:
        """The oracle run of the first seed, if any (the report's regret curves)."""
        first = next((r for r in self.runs if r.regret is not None), None)
        if first is None:
            return None
        name = first.regret.oracle if first.regret else ""
        return next(
            (r.result for r in self.runs if r.policy == name and r.seed == first.seed), None
        )

    def policies(self) -> list[str]:
        """Distinct policy specs in run order."""
        return list(dict.fromkeys(r.policy for r in self.runs))

    def first_seed(self) -> list[PolicyRun]:
        """One run per policy (its first seed): what per-run charts draw."""
        seen: dict[str, PolicyRun] = {}
        for run in self.runs:
            seen.setdefault(run.policy, run)
        return list(seen.values())
