"""The decode-table check flags a larger gamma or batch that runs cheaper."""

from __future__ import annotations

import json
from typing import Any

from nightjar.profile.check import inversions, warning


def _table(step: dict[tuple[int, int], float]) -> dict[str, Any]:
    return {"decode": [[b, g, 512.0, ms, 0.0, ms] for (b, g), ms in step.items()]}


MONOTONE = {(1, 0): 30.0, (1, 1): 40.0, (64, 0): 200.0, (64, 1): 700.0}


def test_a_monotone_table_has_no_inversions() -> None:
    assert inversions(_table(MONOTONE)) == []
    assert warning(_table(MONOTONE)) is None


def test_a_small_dip_is_within_the_tolerance() -> None:
    assert inversions(_table({**MONOTONE, (64, 1): 195.0})) == []


def test_a_cheaper_larger_gamma_and_batch_are_named() -> None:
    # As the issue-15 profile: B = 64 at gamma 1 dearer than gamma 2 (861 vs 775
    # measured; 700 here, past the 10%), and a B = 1 cell dearer than B = 64 at gamma 0.
    data = _table({(1, 0): 300.0, (1, 1): 310.0, (1, 2): 320.0,
                   (64, 0): 200.0, (64, 1): 861.0, (64, 2): 700.0})
    found = inversions(data)
    assert {(i.axis, i.batch_size, i.gamma, i.next_value) for i in found} == {
        ("gamma", 64, 1, 2), ("batch", 1, 0, 64)}
    line = warning(data)
    assert line is not None and "2 decode cells" in line and "gamma 1 861.0 ms" in line


def test_the_measured_cpu_profile_shape_is_read_from_json() -> None:
    text = json.dumps(_table({(4, 0): 30.0, (4, 1): 108.0, (4, 2): 72.0}))
    assert [i.describe() for i in inversions(json.loads(text))] == [
        "B=4 context=512: gamma 1 108.0 ms > gamma 2 72.0 ms"]


def test_profile_show_prints_the_warning(tmp_path: Any, capsys: Any) -> None:
    from nightjar.cli import main
    from nightjar.profile.profile import load_profile

    data = load_profile("a100-80gb/vicuna-13b+vicuna-68m").to_json()
    assert inversions(data) == []  # the bundled roofline is monotone
    row = next(r for r in data["decode"] if r[0] == 64 and r[1] == 3)
    row[3:6] = [0.5 * x for x in row[3:6]]  # gamma 3 at B = 64 now cheaper than gamma 2
    path = tmp_path / "noisy.json"
    path.write_text(json.dumps(data))
    assert main(["profile", "--show", str(path)]) == 0
    out = " ".join(capsys.readouterr().err.split())  # every command warns on stderr
    assert "decode cells are cheaper than a smaller gamma or batch" in out
    assert "B=64" in out
