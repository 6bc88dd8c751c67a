"""experiments/done_when_power.py: the chance that a simulator off by a given bias meets
"every entry within 10%", from a benchmark's own run-to-run spread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.scripts import load_script

METRICS = ("throughput_tok_s", "tpot_s_mean", "ttft_s_mean", "e2e_s_mean", "mean_batch_size")


def _runs(spread: float) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    rows = []
    for label in ("a", "b"):
        for r in range(1, 6):
            noise = 1.0 + spread * rng.standard_normal()  # one machine state per run
            rows.append({"round": r, "label": label,
                         **{m: 10.0 * noise * (1 + 0.01 * i) for i, m in enumerate(METRICS)}})
    return pd.DataFrame(rows)


def test_a_steady_engine_is_met_exactly_when_the_bias_is_inside_the_band() -> None:
    script = load_script("experiments/done_when_power.py")
    steady = _runs(1e-6)
    p, per = script.chance(steady, 5, 0.0, 2000, np.random.default_rng(0))
    assert p == 1.0 and per == {"a": 1.0, "b": 1.0}
    p, _ = script.chance(steady, 5, 20.0, 2000, np.random.default_rng(0))
    assert p == 0.0


def test_more_rounds_make_a_right_simulator_likelier_to_meet_it() -> None:
    script = load_script("experiments/done_when_power.py")
    noisy = _runs(0.2)
    chances = [script.chance(noisy, rounds, 0.0, 4000, np.random.default_rng(0))[0]
               for rounds in (2, 5, 15)]
    assert 0.0 < chances[0] < chances[1] < chances[2] <= 1.0
    # Both policies must land inside: never likelier than the likelier one alone.
    p, per = script.chance(noisy, 5, 0.0, 4000, np.random.default_rng(0))
    assert p <= min(per.values())


def test_a_missing_or_malformed_runs_csv_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    script = load_script("experiments/done_when_power.py")
    (tmp_path / "runs.csv").write_text("a,b\n1,2\n")
    for folder, needle in ((tmp_path / "nope", "No such file"), (tmp_path, "no column")):
        monkeypatch.setattr("sys.argv", ["done_when_power.py", str(folder)])
        assert script.main() == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err
