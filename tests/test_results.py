"""One result set: summaries and regrets are computed once per run and every consumer
(terminal table, CSVs, report) shows those very numbers."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import nightjar.results.metrics
import nightjar.results.regret
import nightjar.results.run_set
from nightjar.cli import main
from nightjar.report.folder import write_all
from nightjar.results.run_set import ResultSet
from tests.test_report import synthetic_run


def test_sim_summarizes_each_run_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    calls: Counter[str] = Counter()

    def counted(module: Any, name: str) -> None:
        real = getattr(module, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, wrapper)

    # The real functions run; every module that could call them is watched.
    for module in (nightjar.results.metrics, nightjar.results.run_set):
        counted(module, "summarize")
    for module in (nightjar.results.regret, nightjar.results.run_set):
        counted(module, "regret")
    code = main(["sim", "--trace", "steady_low", "--policy", "nospec", "--policy", "fixed:3",
                 "--out", str(tmp_path / "run"), "--quiet"])
    capsys.readouterr()
    assert code == 0
    assert (tmp_path / "run" / "report.html").is_file()
    # nospec, fixed:3 and the oracle: one summary and one regret each, no more.
    assert calls == {"summarize": 3, "regret": 3}


def test_table_csv_and_report_show_the_handed_summaries(tmp_path: Path) -> None:
    runs = [synthetic_run("nightjar", 300, 40, 1), synthetic_run("oracle", 300, 40, 2, 0.5)]
    built = ResultSet.build(runs, title="t")
    # A sentinel throughput no run could produce: it shows wherever the summary is used.
    first = built.runs[0]
    marked = dataclasses.replace(
        first, summary=dataclasses.replace(first.summary, throughput_tok_s=987654.0)
    )
    results = dataclasses.replace(built, runs=(marked, *built.runs[1:]))
    write_all(results, tmp_path / "o", report=True)
    csv = pd.read_csv(tmp_path / "o" / "summary.csv")
    assert csv.loc[0, "throughput_tok_s"] == 987654.0
    assert "987654" in (tmp_path / "o" / "report.html").read_text()
    record = (tmp_path / "o" / "nightjar" / "summary.json").read_text()
    assert '"throughput_tok_s": 987654.0' in record


def test_regret_against_the_oracle_of_the_same_seed() -> None:
    a0, a1 = synthetic_run("fixed:2", 200, 20, 0), synthetic_run("fixed:2", 200, 20, 1)
    o0 = synthetic_run("oracle", 200, 20, 0, slow=0.5)
    o1 = synthetic_run("oracle", 200, 20, 1, slow=0.25)
    results = ResultSet.build([a0, a1, o0, o1])
    r0, r1 = (r.regret for r in results.runs[:2])
    assert r0 is not None and r1 is not None
    assert r0.oracle_ptl_s == pytest.approx(nightjar.results.regret.per_token_latency(o0))
    assert r1.oracle_ptl_s == pytest.approx(nightjar.results.regret.per_token_latency(o1))
    assert results.policies() == ["fixed:2", "oracle"]
    assert [r.seed for r in results.first_seed()] == [0, 0]
    assert len({r.slug for r in results.runs}) == 4
    no_oracle = ResultSet.build([a0, o0], oracle_policy=None)
    assert no_oracle.regrets is None and no_oracle.oracle is None
