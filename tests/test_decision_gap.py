"""experiments/decision_gap.py: the share of decode steps that speculated per batch
bucket, live against the simulator's replay of the same benchmark."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from tests.scripts import ROOT, load_script

gap = load_script("experiments/decision_gap.py")
BENCH = ROOT / "reports/simulator/agreement-20261207/bench-live-spec-loses"


def test_shares_count_decode_steps_only_per_bucket() -> None:
    steps = pd.DataFrame({
        "batch_size": [1, 3, 6, 6, 6, 40, 0],
        "prefill_tokens": [0, 0, 0, 0, 200, 0, 64],  # a mixed and a prefill-only step
        "gamma": [3, 0, 2, 0, 3, 0, 0],
    })
    shares = gap.decode_shares(steps).set_index("bucket")
    assert shares.loc["(0, 4]", "steps"] == 2 and shares.loc["(0, 4]", "spec_share"] == 0.5
    assert shares.loc["(4, 8]", "steps"] == 2 and shares.loc["(4, 8]", "mean_gamma"] == 2.0
    assert shares.loc["(32, 48]", "spec_share"] == 0.0
    assert len(shares) == 3


@pytest.mark.skipif(not BENCH.exists(), reason="the committed benchmark is not in this tree")
def test_a_static_policy_speculates_alike_in_both_engines(tmp_path: Path) -> None:
    # fixed:3 chooses gamma 3 at every decode step in either engine: where the replay
    # and the engine agree by construction, the table must say so.
    profile = str(BENCH.parent / "profile.json")
    with pytest.warns(UserWarning):  # the profile's three small-batch cells
        assert gap.main([str(BENCH), "--profile", profile, "--out", str(tmp_path),
                         "--policy", "fixed:3"]) == 0
    shares = pd.read_csv(tmp_path / "decisions.csv")
    assert set(shares["engine"]) == {"live", "sim"}
    assert (shares["spec_share"] == 1.0).all() and (shares["mean_gamma"] == 3.0).all()
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert sorted(runs["round"]) == [1, 2, 3] and set(runs["policy"]) == {"fixed:3"}
    assert "| fixed:3 | (0, 4] |" in (tmp_path / "README.md").read_text()
