"""``nightjar sim`` on a profile whose table stops below the default ``--gamma-max``
(``nightjar profile`` measures gammas 0..3 by default): the default follows the table;
a value the user gave past it is refused in one line, as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.cli import main

BUNDLED = Path(__file__).parents[1] / "nightjar" / "profile" / "bundled"


def _profile_to(tmp_path: Path, top: int) -> Path:
    doc = json.loads((BUNDLED / "a100-80gb__vicuna-13b+vicuna-68m.json").read_text())
    doc["decode"] = [row for row in doc["decode"] if row[1] <= top]
    doc["name"] = f"a100-to-gamma-{top}"
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(doc))
    return path


def _trace(tmp_path: Path) -> Path:
    reqs = [{"arrival_s": 0.05 * i, "prompt_tokens": 64, "output_tokens": 24} for i in range(40)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"requests": reqs}))
    return path


def test_the_default_gamma_max_follows_a_shorter_table(tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = main(["sim", "--trace", str(_trace(tmp_path)), "--profile",
                 str(_profile_to(tmp_path, 3)), "--policy", "fixed:3", "--policy", "nightjar+",
                 "--no-oracle", "--out", str(out), "--quiet"])
    assert code == 0
    for run in ("fixed-3", "nightjar+"):
        steps = (out / run / "steps.csv").read_text().splitlines()
        header = steps[0].split(",")
        gammas = {int(line.split(",")[header.index("gamma")]) for line in steps[1:]}
        assert max(gammas) <= 3, run
    assert max(gammas) >= 1  # nightjar+ speculated, at most as far as the table prices


def test_a_given_gamma_max_past_the_table_is_still_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["sim", "--trace", str(_trace(tmp_path)), "--profile",
                 str(_profile_to(tmp_path, 3)), "--gamma-max", "4",
                 "--out", str(tmp_path / "run")])
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--gamma-max 4 exceeds the profile's table (gamma <= 3)" in err
