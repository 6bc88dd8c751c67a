"""Worker-side timers and memory facts for the measured profiler.

Plugged into vLLM as ``worker_extension_cls`` (a public engine argument: vLLM mixes
the class into its worker), so the profiler reaches it with
``LLM.collective_rpc("nightjar_probe_...")`` by method name, in any process layout.

Timers (each record is ``(kind, start, seconds)``, ``start`` on ``time.monotonic()``,
the clock the scheduler's step log uses, so the profiler can match records to steps):

- ``draft``: one call of the drafter's ``propose`` (all of a step's draft passes,
  their input preparation and greedy picks);
- ``forward``: one forward pass of the target model (forward hooks);
- ``logits``: one ``compute_logits`` of the target model.

On CUDA each timer synchronises the device at both ends, so a record holds the
device time of its own work; that adds two synchronisations per timed call.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import torch

Record = tuple[str, float, float]
DRAFT_PREFIX = "draft_model."  # vLLM's prefix for the draft's attention layers


def _sync() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


def _copy_rate(src: torch.Tensor, dst: torch.Tensor, repeats: int = 5) -> float:
    """Bytes per second of ``dst.copy_(src)``, the median of ``repeats`` copies."""
    times = []
    for _ in range(repeats):
        _sync()
        start = time.perf_counter()
        dst.copy_(src, non_blocking=False)
        _sync()
        times.append(time.perf_counter() - start)
    times.sort()
    return float(src.numel() * src.element_size()) / max(times[len(times) // 2], 1e-9)


class ProfileProbe:
    """Mixed into vLLM's worker; every attribute is prefixed to avoid clashes."""

    _njp_records: list[Record] | None = None

    def _njp_model_runner(self) -> Any:
        return getattr(self, "model_runner", None)

    def nightjar_probe_start(self) -> bool:
        """Install the timers (once) and clear the records; True if a drafter exists."""
        runner = self._njp_model_runner()
        if self._njp_records is None:
            self._njp_records = []
            self._njp_install(runner)
        self._njp_records.clear()
        return getattr(runner, "drafter", None) is not None

    def _njp_install(self, runner: Any) -> None:
        records = self._njp_records
        assert records is not None
        model = runner.model
        opened: list[float] = []

        def pre(_module: Any, _args: Any) -> None:
            _sync()
            opened.append(time.monotonic())

        def post(_module: Any, _args: Any, _out: Any) -> None:
            _sync()
            start = opened.pop()
            records.append(("forward", start, time.monotonic() - start))

        model.register_forward_pre_hook(pre)
        model.register_forward_hook(post)
        model.compute_logits = self._njp_timed("logits", model.compute_logits)
        drafter = getattr(runner, "drafter", None)
        if drafter is not None:
            # Wraps whatever propose is installed now (Nightjar's worker routes it
            # through its own skip logic first; a skipped pass costs ~nothing).
            drafter.propose = self._njp_timed("draft", drafter.propose)

    def _njp_timed(self, kind: str, fn: Any) -> Any:
        records = self._njp_records
        assert records is not None

        def timed(*args: Any, **kwargs: Any) -> Any:
            _sync()
            start = time.monotonic()
            out = fn(*args, **kwargs)
            _sync()
            records.append((kind, start, time.monotonic() - start))
            return out

        return timed

    def nightjar_probe_take(self) -> list[Record]:
        """The records so far (and forget them)."""
        out = list(self._njp_records or [])
        if self._njp_records is not None:
            self._njp_records.clear()
        return out

    def nightjar_probe_facts(self) -> dict[str, Any]:
        """What the worker knows about memory: weights, KV layout, pool, bandwidths."""
        runner = self._njp_model_runner()
        vllm_config: Any = getattr(self, "vllm_config", None)
        kv = runner.kv_cache_config
        target_kv = draft_kv = 0
        block_size = 0
        drafter = getattr(runner, "drafter", None)
        # A draft model's layers carry vLLM's prefix; an EAGLE head's or MTP layer's
        # are numbered after the target's, and the proposer lists them.
        draft_layers = set(getattr(drafter, "_draft_attn_layer_names", ()) or ())
        for group in kv.kv_cache_groups:
            spec = group.kv_cache_spec
            block_size = int(spec.block_size)
            per_token = int(spec.page_size_bytes) // int(spec.block_size)
            for name in group.layer_names:
                if name.startswith(DRAFT_PREFIX) or name in draft_layers:
                    draft_kv += per_token
                else:
                    target_kv += per_token
        draft_model = getattr(drafter, "model", None)
        cuda = torch.cuda.is_available()
        facts: dict[str, Any] = {
            "platform": "cuda" if cuda else "cpu",
            "device_name": torch.cuda.get_device_name() if cuda else cpu_model_name(),
            "cpu_model": cpu_model_name(),
            "cpu_count": os.cpu_count() or 0,
            "torch": str(torch.__version__),
            "dtype": str(runner.model_config.dtype).removeprefix("torch."),
            "target_weight_bytes": _param_bytes(runner.model),
            # An EAGLE head shares the target's embedding (and maybe LM head): count
            # only what the drafter adds.
            "draft_weight_bytes": _param_bytes(draft_model, skip=runner.model)
            if draft_model is not None
            else 0,
            "target_kv_bytes_per_token": target_kv,
            "draft_kv_bytes_per_token": draft_kv,
            "block_size": block_size,
            "num_blocks": int(kv.num_blocks),
            "gpu_memory_utilization": float(vllm_config.cache_config.gpu_memory_utilization),
        }
        facts.update(_bandwidths(cuda))
        return facts


def _param_bytes(model: Any, skip: Any = None) -> int:
    """Bytes of ``model``'s parameters, less those it shares with ``skip``."""
    shared = {id(p) for p in skip.parameters()} if skip is not None else set()
    return int(
        sum(p.numel() * p.element_size() for p in model.parameters() if id(p) not in shared)
    )


def _bandwidths(cuda: bool) -> dict[str, Any]:
    """Device memory size and copy rates (64 MiB copies, median of 5)."""
    n = 16 << 20  # float32 elements: 64 MiB
    if cuda:
        total = int(torch.cuda.mem_get_info()[1])
        a = torch.empty(n, device="cuda")
        b = torch.empty(n, device="cuda")
        host = torch.empty(n, pin_memory=True)
        device_rate = 2 * _copy_rate(a, b)  # a copy reads and writes every byte
        link_rate = _copy_rate(host, a)
        del a, b, host
    else:
        total = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
        a, b = torch.empty(n), torch.empty(n)
        device_rate = 2 * _copy_rate(a, b)
        link_rate = device_rate / 2  # "offload" on CPU is a host-to-host copy
        del a, b
    return {
        "device_bytes": total,
        "device_bandwidth_bytes_per_s": device_rate,
        "host_link_bytes_per_s": link_rate,
    }
