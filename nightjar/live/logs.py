"""Quiet engines: vLLM's log goes to a file in full and to the terminal only where it matters.

vLLM prints screens of INFO lines and repeated warnings per engine it starts (a measured
profile starts several), which bury Nightjar's own progress. :func:`configured` writes a
``logging`` dict-config and points ``VLLM_LOGGING_CONFIG_PATH`` at it before vLLM is
imported; engine-core processes inherit the environment, so they log the same way. The
terminal gets warnings and errors (every record with ``--verbose``), minus the known
harmless ones in :data:`HARMLESS`; the file gets everything at INFO and above (DEBUG
with ``--verbose``). Without ``--verbose`` it also silences what bypasses ``logging``
(tqdm bars, Python warnings, torch's C++ warnings) through the environment.
Imports neither vllm nor torch.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# Warnings vLLM 0.32.0 (CPU) repeats on every engine start or shutdown that say nothing
# about this run: (logger name prefix, message prefix), matched on the unformatted
# message. Seen in the log of a two-policy ``nightjar live`` replay of a tiny model.
HARMLESS: tuple[tuple[str, str], ...] = (
    ("vllm.config", "Enforce eager set"),
    ("vllm.config", "Inductor compilation was disabled"),
    ("vllm.config", "max_num_scheduled_tokens is set to"),
    ("vllm.config", "Using custom scheduler class"),
    ("vllm.platforms", "Triton is not installed"),
    ("vllm.platforms", "Reset SSM cache type"),
    ("vllm.v1.worker", "libtcmalloc is not found"),  # a speed hint (docs/live.md)
    ("vllm.v1.sample", "min_p and logit_bias"),
    ("vllm.v1.engine.input_processor", "Passing raw prompts"),
    # Engine cores that outlive a grace period at shutdown are killed: expected here.
    ("vllm.v1.utils", "[shutdown] Process manager: force killing"),
    # A race in vLLM's executor shutdown: every worker exited as the wait timed out.
    (
        "vllm.v1.executor",
        "[shutdown] Executor: workers still running after grace period; sending SIGTERM count=0",
    ),
)
# What else writes to the terminal outside ``logging`` (children inherit these):
# tqdm bars while loading weights, Python warnings, and torch's C++ warnings.
_QUIET_ENV = {"TQDM_DISABLE": "1", "PYTHONWARNINGS": "ignore", "TORCH_CPP_LOG_LEVEL": "ERROR"}


class HarmlessFilter(logging.Filter):
    """Drops the records listed in :data:`HARMLESS` (used by the terminal handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        msg = record.getMessage()
        return not any(
            record.name.startswith(name) and msg.startswith(prefix) for name, prefix in HARMLESS
        )


def config(log_file: Path, verbose: bool) -> dict[str, object]:
    """The ``logging.config.dictConfig`` for vLLM's and Nightjar's engine-side loggers."""
    handlers = ["terminal", "file"]
    fmt = "%(levelname)s %(asctime)s %(process)d [%(name)s] %(message)s"
    logger = {"handlers": handlers, "level": "DEBUG" if verbose else "INFO", "propagate": False}
    terminal: dict[str, object] = {
        "class": "logging.StreamHandler",
        "formatter": "plain",
        "level": "DEBUG" if verbose else "WARNING",
        "stream": "ext://sys.stderr",
    }
    if not verbose:
        terminal["filters"] = ["harmless"]
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"plain": {"format": fmt, "datefmt": "%H:%M:%S"}},
        "filters": {"harmless": {"()": f"{__name__}.HarmlessFilter"}},
        "handlers": {
            "terminal": terminal,
            "file": {
                "class": "logging.FileHandler",
                "formatter": "plain",
                "filename": str(log_file),
                "mode": "a",  # the engine-core processes append to the same file
                "level": "DEBUG" if verbose else "INFO",
                "encoding": "utf-8",
            },
        },
        "loggers": {"vllm": logger, "nightjar.live": logger},
    }


@contextmanager
def configured(log_file: Path, verbose: bool = False) -> Iterator[Path]:
    """Route vLLM's logging for this process and the engines it starts while inside.

    Yields the log file. vLLM must not have configured its logging in this process yet
    for the terminal filter to apply here too; engine-core processes started inside
    always read it. The environment and Python's warning filters are restored on exit,
    so nothing leaks into later engines (tests run many in one process).
    """
    log_file = log_file.resolve()
    log_file.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="nightjar-logging-") as tmp:
        path = Path(tmp) / "vllm-logging.json"
        path.write_text(json.dumps(config(log_file, verbose)), encoding="utf-8")
        with _environment(path, verbose):
            yield log_file


@contextmanager
def _environment(path: Path, verbose: bool) -> Iterator[None]:
    env = {
        "VLLM_CONFIGURE_LOGGING": "1",
        "VLLM_LOGGING_CONFIG_PATH": str(path),
        "VLLM_LOGGING_LEVEL": "DEBUG" if verbose else "INFO",
    }
    if not verbose:
        env.update({k: v for k, v in _QUIET_ENV.items() if k not in os.environ})
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        with warnings.catch_warnings():
            if not verbose:
                warnings.simplefilter("ignore", FutureWarning)
                warnings.simplefilter("ignore", DeprecationWarning)
            yield
    finally:
        for key, old in saved.items():
            if old is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = old
