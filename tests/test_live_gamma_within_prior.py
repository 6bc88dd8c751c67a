"""A live run's longest speculation is held to what its ``--profile`` prices: past the
table a lookup returns the top gamma's time, so longer speculation would look free to
``nightjar+`` (an agreement run at gamma_max 4 on a 0..3 profile kept speculating
under overload and could not be validated afterwards)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nightjar.errors import NightjarInputError
from nightjar.live.profiling.latency import Clamped, StepTable, load_latency, priced_gamma_max
from nightjar.live.step_prior import within_prior

PROFILE = "a100-80gb/vicuna-13b+vicuna-68m"  # bundled, gammas 0..8


def _step_table(tmp_path: Path, gammas: int) -> str:
    table = StepTable(batch_sizes=(1, 8), step_s=tuple((0.02 + 0.01 * g, 0.03 + 0.02 * g)
                                                       for g in range(gammas + 1)))
    path = tmp_path / "table.json"
    path.write_text(json.dumps(table.to_json()))
    return str(path)


def test_a_prior_beyond_its_table_prices_the_top_gamma_which_is_why_the_cap_exists() -> None:
    latency, _ = load_latency(PROFILE)
    assert isinstance(latency, Clamped)
    top = priced_gamma_max(PROFILE)
    assert top == latency.profile.gamma_max == 8
    assert latency.step_time_s(8, top + 1, 256.0) == latency.step_time_s(8, top, 256.0)


def test_a_default_gamma_max_is_lowered_to_the_table_and_a_given_one_refused(
    tmp_path: Path,
) -> None:
    table = _step_table(tmp_path, 2)
    assert priced_gamma_max(table) == 2
    assert within_prior(None, 4, table) == 2
    assert within_prior(None, 2, table) == 2
    assert within_prior(1, 1, table) == 1
    with pytest.raises(NightjarInputError, match=r"--gamma-max 4 exceeds the --profile's "
                       r"table \(gamma <= 2\): pass --gamma-max 2"):
        within_prior(4, 4, table)
    assert within_prior(None, 4, PROFILE) == 4  # the table reaches further
    assert within_prior(7, 7, None) == 7  # no prior, nothing to hold it to
