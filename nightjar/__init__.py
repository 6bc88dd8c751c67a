"""Nightjar: adaptive speculative decoding for LLM serving.

The core package holds everything engine-neutral: the policy contract and the
policies, traces, profiles, the memory controller, metrics and reports. It never
imports torch, vllm or simpy at import time; the simulator lives in
``nightjar.sim`` and the vLLM integration in ``nightjar.live``.
"""

__version__ = "0.1.0"
