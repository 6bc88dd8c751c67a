"""reports/paper/ says only what its rows say: the README's numbers and verdicts are
regenerated from the committed rows.csv and must match; its hand-written prose states
no result; tables.md is the rows' tables; the command printed under a table re-runs
its rows; the traces the study names are committed."""

from __future__ import annotations

import csv
import json
import re
import shlex
from pathlib import Path

import pytest

from nightjar.cli import main
from tests.scripts import ROOT, load_script

PAPER = ROOT / "reports" / "paper"
pc = load_script("experiments/paper_cells.py")
pt = load_script("experiments/paper_text.py", "paper_cells")
paper = load_script("experiments/paper.py", "paper_cells", "paper_text")


@pytest.fixture(scope="module")
def committed() -> tuple[list[dict[str, float | str]], list[dict[str, float | str]],
                         dict[str, object]]:
    rows = paper.read_csv(PAPER / "rows.csv")
    corr = paper.read_csv(PAPER / "correction.csv")
    meta = json.loads((PAPER / "run.json").read_text())
    return rows, corr, meta


def test_the_readme_is_what_the_rows_say(committed: tuple) -> None:
    rows, corr, meta = committed
    readme = (PAPER / "README.md").read_text()
    regenerated = pt.render_readme(readme, rows, corr, meta)
    assert regenerated == readme, (
        "reports/paper/README.md differs from its rows: run "
        "`python experiments/paper.py --render-only`"
    )


def test_tables_md_is_what_the_rows_say(committed: tuple) -> None:
    rows, corr, _ = committed
    seeds = len({r["seed"] for r in rows})
    assert pt.tables_md(rows, corr, seeds) == (PAPER / "tables.md").read_text()


RESULT = re.compile(r"±|[-+]?\d+(\.\d+)?\s*(%|tok/s|req/s|ms\b|s\b|x\b)")


def test_the_hand_written_prose_states_no_result() -> None:
    prose = pt.prose((PAPER / "README.md").read_text())
    # Code blocks (the commands) are not prose, and the confidence level is method.
    text = re.sub(r"```.*?```", "", prose, flags=re.DOTALL)
    text = re.sub(r"95% (t )?interval", "", text)
    found = [m.group(0) for m in RESULT.finditer(text)]
    assert found == [], found


def test_the_check_can_fail() -> None:
    readme = (PAPER / "README.md").read_text()
    edited = readme.replace("<!-- end: goal -->", "  nospec wins.\n<!-- end: goal -->", 1)
    rows = paper.read_csv(PAPER / "rows.csv")
    corr = paper.read_csv(PAPER / "correction.csv")
    meta = json.loads((PAPER / "run.json").read_text())
    assert pt.render_readme(edited, rows, corr, meta) != edited
    assert RESULT.search("it gained 3.5% over fixed:3")


def test_the_paper_traces_are_committed_as_the_study_defines_them() -> None:
    for name, spec in pc.TRACE_SPECS.items():
        path = PAPER / "traces" / f"{name}.json"
        assert json.loads(path.read_text()) == spec


def test_the_command_under_a_table_re_runs_its_rows(tmp_path: Path, committed: tuple) -> None:
    rows = committed[0]
    section, trace, profile = "table6", "table6-alpaca", pc.OURS[0]
    (cmd,) = pc.commands(section, trace, profile, 5)
    assert cmd in (PAPER / "tables.md").read_text()
    args = shlex.split(cmd)[1:]
    # Two seeds of the five (seeds 0 and 1 are the same runs either way), to keep it short.
    args[args.index("--seeds") + 1] = "2"
    out = tmp_path / "cell"
    assert main([*args, "--out", str(out), "--quiet", "--no-report"]) == 0
    with (out / "seeds.csv").open() as f:
        got = {(int(r["seed"]), r["policy"]): r for r in csv.DictReader(f)}
    want = {(int(r["seed"]), str(r["run"])): r for r in rows
            if (r["section"], r["trace"], r["profile"]) == (section, trace, profile)
            and int(r["seed"]) < 2}
    assert set(got) == set(want)
    for key, row in want.items():
        for metric in ("throughput_tok_s", "e2e_s_mean", "ttft_s_mean", "regret_pct"):
            assert float(got[key][metric]) == pytest.approx(float(row[metric]), rel=1e-9), (
                key, metric)
