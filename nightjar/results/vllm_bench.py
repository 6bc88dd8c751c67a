"""A run as the JSON `vllm bench serve --save-result` writes, so that a simulated or a
live Nightjar run sits beside a vLLM benchmark in the same tools and scripts.

vLLM's definitions, from the run's own records: ``duration`` from the first arrival
to the last finish; TTFT, TPOT (``(e2e - ttft) / (output - 1)``) and E2EL per finished
request, in milliseconds, with mean, median, std and the p90/p95/p99 percentiles.
ITL (the gaps between a request's streamed chunks): every decode step gives each of
its ``batch_size`` running requests one chunk, so the run's ITL samples are its decode
steps' times, each counted ``batch_size`` times (a request's wait between its first
token and its first decode step is not among them). Fields vLLM fills from a live
server that a run has no equivalent for (texts, errors, per-request lists) are left
out; ``nightjar`` holds where the run came from.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nightjar.core.records import RunResult

PERCENTILES = (90, 95, 99)


def _stats(name: str, values_s: np.ndarray, weights: np.ndarray | None = None
           ) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    keys = ["mean", "median", "std", *(f"p{p}" for p in PERCENTILES)]
    if values_s.size == 0 or (weights is not None and weights.sum() <= 0):
        return {f"{k}_{name}_ms": None for k in keys}
    ms = values_s * 1e3
    if weights is None:
        out[f"mean_{name}_ms"] = float(ms.mean())
        out[f"median_{name}_ms"] = float(np.median(ms))
        out[f"std_{name}_ms"] = float(ms.std())
        for p in PERCENTILES:
            out[f"p{p}_{name}_ms"] = float(np.percentile(ms, p))
        return out
    mean = float((ms * weights).sum() / weights.sum())
    order = np.argsort(ms, kind="stable")
    cum = np.cumsum(weights[order]) / weights.sum()

    def quantile(q: float) -> float:  # the sample at which q of the weight is reached
        return float(ms[order][min(int(np.searchsorted(cum, q)), ms.size - 1)])

    out[f"mean_{name}_ms"] = mean
    out[f"median_{name}_ms"] = quantile(0.5)
    out[f"std_{name}_ms"] = float(np.sqrt(((ms - mean) ** 2 * weights).sum() / weights.sum()))
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = quantile(p / 100)
    return out


def bench_result(result: RunResult) -> dict[str, Any]:
    """``result`` as vLLM's saved benchmark result (one run: one policy, one seed)."""
    req = result.requests_frame()
    done = req[req["finish_s"].notna()]
    start = float(req["arrival_s"].min()) if len(req) else 0.0
    end = float(done["finish_s"].max()) if len(done) else start
    duration = end - start
    inputs, outputs = int(done["prompt_tokens"].sum()), int(done["output_tokens"].sum())

    def per_s(x: float) -> float | None:
        return x / duration if duration > 0 else None

    steps = result.steps_frame()
    decode = steps[steps["batch_size"] > 0] if len(steps) else steps
    out: dict[str, Any] = {
        "backend": f"nightjar-{result.engine}",
        "model_id": result.profile,
        "num_prompts": len(req),
        "duration": duration,
        "completed": len(done),
        "failed": int(len(req) - len(done)),
        "total_input_tokens": inputs,
        "total_output_tokens": outputs,
        "request_throughput": per_s(len(done)),
        "output_throughput": per_s(outputs),
        "total_token_throughput": per_s(inputs + outputs),
    }
    out |= _stats("ttft", done["ttft_s"].to_numpy(float))
    out |= _stats("tpot", done["tpot_s"].dropna().to_numpy(float))
    out |= _stats("itl", decode["step_time_s"].to_numpy(float) if len(decode) else np.zeros(0),
                  decode["batch_size"].to_numpy(float) if len(decode) else np.zeros(0))
    out |= _stats("e2el", done["e2e_s"].to_numpy(float))
    out["percentiles"] = list(PERCENTILES)
    out["nightjar"] = {"policy": result.policy, "engine": result.engine, "trace": result.trace,
                       "profile": result.profile, "seed": result.seed,
                       "provenance": result.provenance}
    return out
