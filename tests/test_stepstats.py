"""What a step emitted is what vLLM handed its clients, not what it sampled."""

from __future__ import annotations

from types import SimpleNamespace

from nightjar.live.plugins.stepstats import emitted_tokens


def _out(*tokens: list[int]) -> SimpleNamespace:
    return SimpleNamespace(outputs=[SimpleNamespace(new_token_ids=t) for t in tokens])


def test_emitted_sums_every_clients_kept_tokens() -> None:
    # A verify step sampled 4 tokens for a request with 1 left: vLLM kept 1.
    assert emitted_tokens({0: _out([5], [7, 8, 9]), 1: _out([], [3, 4])}) == 6
    assert emitted_tokens({}) == 0
