"""The CPU thread binding Nightjar gives tensor-parallel ranks (no vLLM needed)."""

from __future__ import annotations

import pytest

from nightjar.errors import NightjarInputError
from nightjar.live.engine_spec import cpu_thread_binding


def test_each_rank_gets_its_own_contiguous_cores() -> None:
    assert cpu_thread_binding(2, [0, 1]) == "0|1"
    assert cpu_thread_binding(2, [3, 2, 1, 0]) == "0,1|2,3"
    assert cpu_thread_binding(3, list(range(8))) == "0,1,2|3,4,5|6,7"
    assert cpu_thread_binding(1, [5]) == "5"


def test_fewer_cores_than_ranks_is_an_input_error() -> None:
    with pytest.raises(NightjarInputError, match="needs at least 4 CPU cores"):
        cpu_thread_binding(4, [0, 1])
