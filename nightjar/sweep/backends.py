"""Where cells run: this process, a pool of local processes, or a Ray cluster.

Every backend runs the same pure function (:func:`nightjar.sweep.cell.run_cell`) and
hands each finished row back to the driver, which alone writes cell files: a worker
on a remote node needs no access to the output folder, and an interrupted sweep
never has a writer the driver cannot stop.

Ctrl-C: local workers ignore SIGINT (the terminal sends it to the whole process
group) and the driver terminates them; Ray tasks are cancelled. Either way the
driver stops before writing anything more, so no half cell exists.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.interrupts import default_signals_in_child
from nightjar.sweep.cell import CellTask, attempt

# done(task, row, error): exactly one of row and error is None.
Done = Callable[[CellTask, dict[str, Any] | None, str | None], None]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM and SIGHUP: the driver's handlers raise (nightjar.interrupts); a worker
    # the driver terminates just ends.
    default_signals_in_child()


def _run_indexed(
    item: tuple[int, CellTask],
) -> tuple[int, dict[str, Any] | None, str | None]:
    return (item[0], *attempt(item[1]))


def run_local(tasks: Sequence[CellTask], jobs: int, done: Done) -> None:
    """``jobs`` worker processes (forked: they inherit the imported modules)."""
    if jobs <= 1 or len(tasks) <= 1:
        for task in tasks:
            done(task, *attempt(task))
        return
    ctx = multiprocessing.get_context("fork")
    pool = ctx.Pool(min(jobs, len(tasks)), initializer=_ignore_sigint)
    try:
        for index, row, error in pool.imap_unordered(
            _run_indexed, enumerate(tasks), chunksize=1
        ):
            done(tasks[index], row, error)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise NightjarInputError(
            "--ray needs the 'ray' package: pip install 'nightjar[cluster]'"
        ) from None
    return ray


def connect_ray(address: str, jobs: int | None) -> Any:
    """Join a running cluster (``auto`` or ``HOST:PORT``), or start a private local one
    (``local``, with ``jobs`` CPUs). An already initialised Ray is reused."""
    # Ray's C++ core logs connection warnings to stderr; errors reach the user as ours.
    os.environ.setdefault("RAY_BACKEND_LOG_LEVEL", "error")
    ray = _import_ray()
    if ray.is_initialized():
        return ray
    _check_reachable(address)
    kw: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False,
                          "logging_level": "ERROR"}
    try:
        if address == "local":
            # address="local" always starts a new instance; without it ray.init joins
            # whatever cluster /tmp/ray last recorded (even a stopped one).
            ray.init(address="local", num_cpus=jobs, **kw)
        else:
            ray.init(address=address, **kw)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise NightjarInputError(f"--ray {address}: cannot connect ({first})") from None
    return ray


def _auto_address() -> str | None:
    """Where ``ray.init(address="auto")`` will look: RAY_ADDRESS, else the cluster
    that ``ray start`` last recorded on this machine (which may have stopped since)."""
    env = os.environ.get("RAY_ADDRESS")
    if env:
        return env
    try:
        return Path(tempfile.gettempdir(), "ray", "ray_current_cluster").read_text().strip()
    except OSError:
        return None


def _check_reachable(address: str) -> None:
    """Fail fast on a HOST:PORT nobody listens on (ray.init would retry for minutes)."""
    label = address
    if address == "auto":
        found = _auto_address()
        if found is None or found == "auto":
            return  # ray itself says there is no cluster, at once
        address, label = found, f"auto ({found})"
    host, sep, port = address.rpartition(":")
    if address == "local" or address.startswith("ray://") or not sep:
        return
    try:
        with socket.create_connection((host, int(port)), timeout=5.0):
            pass
    except (OSError, ValueError) as exc:
        raise NightjarInputError(f"--ray {label}: cannot connect ({exc})") from None


def run_ray(tasks: Sequence[CellTask], address: str, jobs: int | None, done: Done) -> None:
    """One Ray task per cell; a trace or profile text is put in the object store once."""
    ray = connect_ray(address, jobs)
    remote = ray.remote(num_cpus=1, max_retries=0)(_run_remote)
    refs: dict[str, Any] = {}

    def ref(text: str) -> Any:
        if text not in refs:
            refs[text] = ray.put(text)
        return refs[text]

    pending = {
        remote.remote(t.cell, t.key, ref(t.trace_text), ref(t.profile_text), t.command): t
        for t in tasks
    }
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for r in ready:
                task = pending.pop(r)
                done(task, *_get(ray, r))
    except BaseException:
        for r in pending:
            ray.cancel(r, force=True)
        raise


def _get(ray: Any, ref: Any) -> tuple[dict[str, Any] | None, str | None]:
    try:
        row, error = ray.get(ref)
    except ray.exceptions.RayError as exc:  # the worker died, not the cell's code
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return None, f"Ray: {first}"
    return row, error


def _run_remote(
    cell: Any, key: str, trace_text: str, profile_text: str, command: str
) -> tuple[dict[str, Any] | None, str | None]:
    return attempt(CellTask(cell, key, trace_text, profile_text, command))


def run_tasks(
    tasks: Iterable[CellTask], *, jobs: int, ray: str | None, done: Done
) -> None:
    todo = list(tasks)
    if not todo:
        return
    if ray is None:
        run_local(todo, jobs, done)
    else:
        run_ray(todo, ray, jobs, done)
