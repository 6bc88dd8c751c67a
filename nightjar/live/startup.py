"""Start-up failures of the Nightjar scheduler as one line for the user, not tracebacks.

vLLM builds the scheduler inside its engine-core process; an exception there is
logged with its traceback by the engine core and by ``multiprocessing``, and the
caller only sees ``RuntimeError: Engine core initialization failed``. A
configuration the engine cannot start with (a draft footprint that leaves no KV
block for requests, ``gamma_max`` above the engine's speculative length) is a user
error, so :func:`reports_startup_errors` writes its message to
``LiveSettings.error_file`` and leaves the process with exit code 2 and no
traceback; the caller (:func:`startup_cause`) reads the message back and reports it
as one line (``NightjarInputError``, exit 2). Imports neither vllm nor torch.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from nightjar.errors import NightjarInputError
from nightjar.live.settings import KEY

F = TypeVar("F", bound=Callable[..., None])


def reports_startup_errors(init: F) -> F:
    """Wrap a scheduler ``__init__``: a configuration error becomes a cause file + exit 2."""

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except (ValueError, NightjarInputError) as exc:
            config = getattr(getattr(self, "vllm_config", None), "additional_config", None)
            error_file = _error_file(config)
            if error_file is None:
                raise
            Path(error_file).write_text(str(exc).strip().splitlines()[0], encoding="utf-8")
            _shutdown_executors()
            # SystemExit passes vLLM's "failed to start" traceback logging by, and
            # multiprocessing exits quietly with this code.
            raise SystemExit(2) from None

    return wrapper  # type: ignore[return-value]


def _error_file(config: Any) -> str | None:
    """Where ``nightjar live`` waits for the cause; read raw, since the settings
    themselves may be what failed their checks."""
    raw = (config or {}).get(KEY) if isinstance(config, dict) else None
    path = raw.get("error_file") if isinstance(raw, dict) else None
    return path if isinstance(path, str) else None


def _shutdown_executors() -> None:
    """Stop the engine core's executor, already running when the scheduler is built.

    The engine core never finished its constructor, so vLLM will not shut the
    executor down: its worker monitor would log "Worker proc ... died unexpectedly"
    and its shared-memory queues would leak. The scheduler holds no reference to
    it, hence the search (on this failure path only).
    """
    import gc

    for obj in gc.get_objects():
        if type(obj).__name__.endswith("Executor") and callable(getattr(obj, "shutdown", None)):
            with contextlib.suppress(Exception):  # best effort on the way out
                obj.shutdown()


def startup_cause(error_file: str | None) -> str | None:
    """The one-line cause the engine wrote before it exited, if any."""
    if error_file is None:
        return None
    try:
        text = Path(error_file).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text or None
