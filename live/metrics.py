"""Nightjar's state as Prometheus metrics next to vLLM's, in the API-server process.

``python -m nightjar.live.metrics STATE_FILE VLLM_SERVER_ARGS...`` registers a
collector on prometheus_client's default registry (the one vLLM's ``/metrics``
route serves when it runs a single API server) and then runs vLLM's OpenAI server
module in this same process. Each scrape reads the engine's snapshot file
(:mod:`nightjar.live.state`), so the values are at most a fraction of a second old.
With several API servers (``--api-server-count`` > 1) vLLM switches to its
multiprocess registry and these series are not exported.
"""

from __future__ import annotations

import runpy
import sys
from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from nightjar.live.state import read_state
from nightjar.memory import DraftState

SERVER_MODULE = "vllm.entrypoints.openai.api_server"

# (metric suffix, LiveState field, help)
_GAUGES = (
    ("gamma", "gamma", "speculation length verified in the last engine step (0 = off)"),
    ("chosen_gamma", "chosen_gamma", "the policy's last choice of gamma, before clamping"),
    ("gamma_max", "gamma_max", "largest gamma the policy may choose"),
    ("batch_size", "batch_size", "running decode requests in the last step"),
    ("kv_total_blocks", "kv_total_blocks", "KV blocks the scheduler may hand out"),
    ("kv_withheld_blocks", "kv_withheld_blocks", "KV blocks withheld for the resident draft"),
)
_COUNTERS = (
    ("steps", "steps", "engine steps scheduled by Nightjar"),
    ("spec_steps", "spec_steps", "engine steps that verified draft tokens"),
    ("drafted_tokens", "drafted", "draft tokens proposed and verified"),
    ("accepted_tokens", "accepted", "draft tokens accepted"),
    ("offloads", "offloads", "completed draft offloads"),
    ("reloads", "reloads", "completed draft reloads"),
)


class NightjarCollector(Collector):  # type: ignore[misc, unused-ignore]
    def __init__(self, state_file: str | Path) -> None:
        self.state_file = Path(state_file)

    def collect(self) -> Iterator[Metric]:
        state = read_state(self.state_file)
        if state is None:
            return  # the engine has not started yet
        labels = ["policy"]
        for name, attr, doc in _GAUGES:
            g = GaugeMetricFamily(f"nightjar_{name}", doc, labels=labels)
            g.add_metric([state.policy], float(getattr(state, attr)))
            yield g
        for name, attr, doc in _COUNTERS:
            c = CounterMetricFamily(f"nightjar_{name}", doc, labels=labels)
            c.add_metric([state.policy], float(getattr(state, attr)))
            yield c
        rate = state.accepted / state.drafted if state.drafted else 0.0
        g = GaugeMetricFamily(
            "nightjar_acceptance_ratio", "accepted / drafted tokens since start", labels=labels
        )
        g.add_metric([state.policy], rate)
        yield g
        # One series per residency state, 1 for the current one (a state-set).
        g = GaugeMetricFamily(
            "nightjar_draft_state", "where the draft model is", labels=["policy", "state"]
        )
        for s in DraftState:
            g.add_metric([state.policy, s.value], float(s.value == state.draft_state))
        yield g
        g = GaugeMetricFamily(
            "nightjar_draft_resident", "1 while the draft model is in device memory", labels=labels
        )
        g.add_metric([state.policy], float(state.draft_state == DraftState.RESIDENT.value))
        yield g


def main(argv: list[str]) -> None:
    state_file, server_args = argv[0], argv[1:]
    REGISTRY.register(NightjarCollector(state_file))
    sys.argv = [SERVER_MODULE, *server_args]
    runpy.run_module(SERVER_MODULE, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
