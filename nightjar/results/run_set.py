"""One run set's results, computed once: summaries and regrets travel with the runs.

The commands build a :class:`ResultSet` right after the engines finish and hand that
one object to the terminal table, the CSV writer and the HTML report, so that no
consumer summarizes a 150k-step run again or can disagree with another about it.

Runs are kept as a list of :class:`PolicyRun`; a policy may appear once per seed.
Each run's regret is taken against the oracle run of the same seed (when there is
one), so several seeds per policy need no change here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from nightjar.core.records import RunResult
from nightjar.core.slo import Slo
from nightjar.results.metrics import Summary, summarize
from nightjar.results.regret import Regret, regret
from nightjar.results.write import unique_slugs

ORACLE = "oracle"


@dataclass(frozen=True, slots=True)
class PolicyRun:
    """One policy's run on one seed with its summary and (optional) regret."""

    result: RunResult
    summary: Summary
    regret: Regret | None
    slug: str  # its folder name in the output (unique within the set)

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
    ) -> ResultSet:
        """Summarize every run once and take regrets against the oracle runs.

        The oracle is the run named ``oracle_policy`` with the same seed (and trace)
        as the run; ``None`` means no regrets even if such a run exists.
        """
        slo = slo or Slo()
        oracles = {
            (r.seed, r.trace): r for r in results if oracle_policy and r.policy == oracle_policy
        }
        runs = []
        for result, slug in zip(results, unique_slugs(results), strict=True):
            oracle = oracles.get((result.seed, result.trace))
            runs.append(
                PolicyRun(
                    result=result,
                    summary=summarize(result, slo),
                    regret=regret(result, oracle) if oracle is not None else None,
                    slug=slug,
                )
            )
        return cls(tuple(runs), slo, title, gamma_max, offload)

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
