"""A progress bar that appears only when a run lasts longer than a second."""

from __future__ import annotations

import sys
import time
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

_SHOW_AFTER_S = 1.0


class LazyProgress:
    """Tracks simulated time per task; draws nothing for short runs or non-TTYs.

    Updates are throttled to 1% steps of each task's total so that a step loop
    running at hundreds of thousands of steps per second does not pay for drawing.
    """

    def __init__(self, enabled: bool = True, show_after_s: float = _SHOW_AFTER_S) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.started = time.perf_counter()
        self.show_after_s = show_after_s
        self._bar: Progress | None = None
        self._tasks: dict[str, tuple[TaskID | None, float, float]] = {}

    def __enter__(self) -> LazyProgress:
        return self

    def __exit__(
        self, exc: type[BaseException] | None, val: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._bar is not None:
            self._bar.stop()

    def print(self, message: str) -> None:
        """A line above the bar (rich markup), or on stderr when no bar is drawn."""
        if self._bar is not None:
            self._bar.console.print(message)
        else:
            Console(stderr=True).print(message)

    def __contains__(self, name: str) -> bool:
        return name in self._tasks

    def add(self, name: str, total: float) -> None:
        self._tasks[name] = (None, max(total, 1e-9), 0.0)

    def update(self, name: str, done: float) -> None:
        task_id, total, shown = self._tasks[name]
        if done - shown < 0.01 * total or not self.enabled:
            return
        if self._bar is None:
            if time.perf_counter() - self.started < self.show_after_s:
                return
            self._bar = Progress(
                TextColumn("{task.description:<28}"),
                BarColumn(),
                TextColumn("{task.percentage:>3.0f}%"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),  # the ETA, from the rate so far
                transient=True,
            )
            self._bar.start()
        if task_id is None:
            task_id = self._bar.add_task(name, total=total)
        self._bar.update(task_id, completed=min(done, total))
        self._tasks[name] = (task_id, total, done)
