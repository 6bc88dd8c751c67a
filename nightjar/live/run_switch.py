"""Several runs on one engine start: the request that opens a run names its policy.

The live benchmark and the profiler run many policies (or many gamma schedules) one
after another on the same engine, so that the runs they compare share one engine
start, one warm-up and one process layout. vLLM builds the scheduler once, in its
own process, so the run's settings travel in-band: the first request of a run
carries ``SamplingParams.extra_args[RUN_KEY] = {"policy", "step_log", "seed"}``, and
the scheduler, which sees every request arrive (``add_request``) while it is idle,
starts the new run before it admits that request: a fresh policy and step driver,
its own step log. The switch is only honoured with ``LiveSettings.switch_runs``
(never behind ``--serve``, where the extra arguments come from clients) and only
while no request runs or waits: a switch in the middle of a run would split it.
Imports neither vllm nor torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RUN_KEY = "nightjar_run"


@dataclass(frozen=True, slots=True)
class RunStart:
    policy: str
    step_log: str
    seed: int = 0

    def extra_args(self) -> dict[str, Any]:
        """``SamplingParams.extra_args`` for the run's first request."""
        return {RUN_KEY: {"policy": self.policy, "step_log": self.step_log, "seed": self.seed}}


def run_start_of(request: Any) -> RunStart | None:
    """The run a request opens, if it opens one."""
    params = getattr(request, "sampling_params", None)
    extra = getattr(params, "extra_args", None) if params is not None else None
    data = extra.get(RUN_KEY) if isinstance(extra, dict) else None
    if not isinstance(data, dict):
        return None
    return RunStart(str(data["policy"]), str(data["step_log"]), int(data.get("seed", 0)))
