"""Nightjar: adaptive speculative decoding for LLM serving.

The core package holds everything engine-neutral: the policy contract and the
policies, traces, profiles, the memory controller, metrics and reports. It never
imports torch, vllm or simpy at import time; the simulator lives in
``nightjar.sim`` and the vLLM integration in ``nightjar.live``.

The Python API (docs/api.md) is importable from here and loaded on first use:
``nightjar.simulate``, ``nightjar.load_run``, ``nightjar.results_frame``,
``nightjar.run_sweep``, ``nightjar.load_sweep``, ``nightjar.sweep_figures``,
``nightjar.Trace`` and ``nightjar.Results``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import TYPE_CHECKING, Any

# One source of truth: pyproject.toml.
__version__ = importlib.metadata.version("nightjar")

_API = {
    "simulate": "nightjar.api", "load_run": "nightjar.api", "results_frame": "nightjar.api",
    "run_sweep": "nightjar.api", "load_sweep": "nightjar.api", "sweep_figures": "nightjar.api",
    "Results": "nightjar.api",
    "Trace": "nightjar.trace.trace", "load_trace": "nightjar.trace.trace",
    "load_profile": "nightjar.profile.profile",
}

if TYPE_CHECKING:
    from nightjar.api import (
        Results,
        load_run,
        load_sweep,
        results_frame,
        run_sweep,
        simulate,
        sweep_figures,
    )
    from nightjar.profile.profile import load_profile
    from nightjar.trace.trace import Trace, load_trace

__all__ = ["Results", "Trace", "__version__", "load_profile", "load_run", "load_sweep",
           "load_trace", "results_frame", "run_sweep", "simulate", "sweep_figures"]


def __getattr__(name: str) -> Any:
    # Lazy: ``import nightjar`` stays cheap (no pandas, plotly or simpy until used).
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'nightjar' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
