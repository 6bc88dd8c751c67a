"""A policy that reads nothing of its context (``ignores_context``: nospec, fixed) is
not given the step's admitted count (nightjar.sim.engine): the run must be the one it
gets when the count is made."""

from __future__ import annotations

import pytest

from nightjar.profile.profile import load_profile
from nightjar.sim import SimConfig, simulate
from nightjar.sim import engine as engine_mod
from nightjar.trace.trace import load_trace

RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"


def _run(policy: str, counted: bool, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    init = engine_mod.Engine.__init__
    asked: list[int] = []

    def spy(self: engine_mod.Engine, *a: object, **k: object) -> None:
        init(self, *a, **k)  # type: ignore[arg-type]
        if counted:
            self._count_batch = True
        asked.append(int(self._count_batch))

    monkeypatch.setattr(engine_mod.Engine, "__init__", spy)
    result = simulate(load_trace("alpaca-burst"), load_profile(RTX), policy, SimConfig(seed=5))
    assert asked == [int(counted)]  # the fast path is taken unless forced off
    return [(s.time_s, s.step_time_s, s.batch_size, s.gamma, s.prefill_tokens, s.emitted)
            for s in result.steps]


@pytest.mark.parametrize("policy", ["nospec", "fixed:3"])
def test_an_uncounted_batch_changes_nothing(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = _run(policy, counted=False, monkeypatch=monkeypatch)
    monkeypatch.undo()
    assert fast == _run(policy, counted=True, monkeypatch=monkeypatch)
