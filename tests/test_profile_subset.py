"""experiments/profile_subset.py: a measured profile cut to a coarser grid keeps the
cells it keeps, exactly, and refuses a grid the measurement does not have."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.profile.profile import Profile
from tests.scripts import ROOT, load_script

cut = load_script("experiments/profile_subset.py")
MEASURED = ROOT / "reports/simulator/agreement-20261207/profile.json"


@pytest.mark.skipif(not MEASURED.exists(), reason="the committed profile is not in this tree")
def test_a_cut_prices_its_own_cells_as_the_measurement_did(tmp_path: Path) -> None:
    out = tmp_path / "coarse.json"
    assert cut.main([str(MEASURED), "--batch-sizes", "1,4,16,64", "--contexts", "512",
                     "--out", str(out)]) == 0
    full = Profile.from_json(json.loads(MEASURED.read_text()), "full")
    coarse = Profile.from_json(json.loads(out.read_text()), "coarse")
    assert list(coarse.batch_sizes) == [1, 4, 16, 64]
    assert list(coarse.context_lens) == [512.0]
    for b in (1, 4, 16, 64):
        for g in range(coarse.gamma_max + 1):
            assert coarse.step_time_s(b, g, 512.0) == full.step_time_s(b, g, 512.0)
    # Off the cut grid it interpolates between what it kept: B 8 now lies on the line
    # from 4 to 16, which the full measurement need not.
    mid = (coarse.step_time_s(4, 0, 512.0) * 8 + coarse.step_time_s(16, 0, 512.0) * 4) / 12
    assert coarse.step_time_s(8, 0, 512.0) == pytest.approx(mid)
    steps = json.loads(out.read_text())["measured"]["decode_steps"]
    assert {(r[0], r[2]) for r in steps} == {(b, 512) for b in (1, 4, 16, 64)}


@pytest.mark.skipif(not MEASURED.exists(), reason="the committed profile is not in this tree")
def test_a_grid_the_measurement_lacks_is_refused(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "coarse.json"
    assert cut.main([str(MEASURED), "--batch-sizes", "1,3", "--contexts", "32",
                     "--out", str(out)]) == 2
    assert "lacks B [3]" in capsys.readouterr().err
    assert not out.exists()
