"""Nightjar's state as Prometheus metrics next to vLLM's, in the API-server process.

``python -m nightjar.live.prometheus STATE_FILE VLLM_SERVER_ARGS...`` registers a
collector on prometheus_client's default registry (the one vLLM's ``/metrics``
route serves when it runs a single API server) and then runs vLLM's OpenAI server
module in this same process. Each scrape reads the engine's snapshot file
(:mod:`nightjar.live.state`), so the values are at most a fraction of a second old.
With several API servers (``--api-server-count`` > 1) vLLM switches to its
multiprocess registry and these series are not exported.

It also makes the server start and stop cleanly: the vLLM flags are parsed and
checked before any engine starts, and a flag vLLM refuses, or an engine that cannot
start (the scheduler's one-line cause, :mod:`nightjar.live.startup`), ends
the process with one line on stderr and exit code 2; and the engine core gets
``SHUTDOWN_GRACE_S`` to exit at shutdown (vLLM's API server gives it 0 s and kills
it, leaking its shared-memory queues).
"""

from __future__ import annotations

import os
import runpy
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from prometheus_client.core import REGISTRY, CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from nightjar.core.memory import DraftState
from nightjar.live.engine_spec import SHUTDOWN_GRACE_S
from nightjar.live.startup import startup_cause
from nightjar.live.state import read_state

SERVER_MODULE = "vllm.entrypoints.openai.api_server"

# (metric suffix, LiveState field, help)
_GAUGES = (
    ("gamma", "gamma", "speculation length verified in the last engine step (0 = off)"),
    ("chosen_gamma", "chosen_gamma", "the policy's last choice of gamma, before clamping"),
    ("gamma_max", "gamma_max", "largest gamma the policy may choose"),
    ("batch_size", "batch_size", "running decode requests in the last step"),
    ("kv_total_blocks", "kv_total_blocks", "KV blocks the scheduler may hand out"),
    ("kv_withheld_blocks", "kv_withheld_blocks", "KV blocks withheld for the resident draft"),
    ("kv_used_blocks", "kv_used_blocks", "KV blocks held by requests (the ballast excluded)"),
    ("kv_free_blocks", "kv_free_blocks", "KV blocks free for requests"),
)
_COUNTERS = (
    ("steps", "steps", "engine steps scheduled by Nightjar"),
    ("spec_steps", "spec_steps", "engine steps that verified draft tokens"),
    ("drafted_tokens", "drafted", "draft tokens proposed and verified"),
    ("accepted_tokens", "accepted", "draft tokens accepted"),
    ("emitted_tokens", "emitted", "tokens the engine emitted (sampled) for requests"),
    ("offloads", "offloads", "completed draft offloads"),
    ("reloads", "reloads", "completed draft reloads"),
    ("migrated_blocks", "migrated_blocks", "KV blocks copied out of the draft's region by reloads"),
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
        # vLLM's kv_cache_usage_perc counts the withheld ballast as used (36% on an
        # idle server with the tiny pair); this is the requests' share of what they
        # may use, a fraction like vLLM's.
        usage = state.kv_used_blocks / state.kv_total_blocks if state.kv_total_blocks else 0.0
        g = GaugeMetricFamily(
            "nightjar_kv_usage_perc",
            "KV cache usage by requests, 0..1, excluding the draft's withheld ballast",
            labels=labels,
        )
        g.add_metric([state.policy], usage)
        yield g
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


class _FlagError(Exception):
    pass


def check_server_args(server_args: list[str]) -> str | None:
    """Parse and validate the flags as vLLM's server will; the first problem, or None."""
    from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())

    def error(message: str) -> Any:
        raise _FlagError(message)

    parser.error = error
    try:
        validate_parsed_serve_args(parser.parse_args(server_args))
    except (_FlagError, ValueError, TypeError) as exc:
        return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return None


def _give_engine_time_to_exit() -> None:
    import vllm.v1.engine.utils as engine_utils

    default = engine_utils.get_engine_process_shutdown_timeout

    def grace(request_timeout: float | None, process_timeout: float | None) -> float | None:
        given = default(request_timeout, process_timeout)
        return float(max(float(given or 0.0), float(request_timeout or 0.0), SHUTDOWN_GRACE_S))

    engine_utils.get_engine_process_shutdown_timeout = grace


def _fail(message: str) -> None:
    sys.stderr.write(f"nightjar: error: {message}\n")
    sys.stderr.flush()
    # The engine processes are gone or going; skip the interpreter teardown, which
    # would print vLLM's and its libraries' exit noise after the one line.
    os._exit(2)


def main(argv: list[str]) -> None:
    state_file, server_args = argv[0], argv[1:]
    problem = check_server_args(server_args)
    if problem is not None:
        _fail(f"vLLM refuses the server flags: {problem}")
    error_file = os.environ.get(ERROR_FILE_ENV)
    REGISTRY.register(NightjarCollector(state_file))
    _give_engine_time_to_exit()
    sys.argv = [SERVER_MODULE, *server_args]
    try:
        runpy.run_module(SERVER_MODULE, run_name="__main__", alter_sys=True)
    except Exception as exc:
        cause = startup_cause(error_file)
        if cause is not None:
            _fail(f"the engine cannot start: {cause}")
        first = (str(exc).strip().splitlines() or [""])[0]
        _fail(f"vLLM stopped: {type(exc).__name__}: {first}")


# The scheduler's start-up error file (LiveSettings.error_file), given by nightjar.live.serve.
ERROR_FILE_ENV = "NIGHTJAR_ERROR_FILE"

if __name__ == "__main__":
    main(sys.argv[1:])
