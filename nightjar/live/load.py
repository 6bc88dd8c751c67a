"""What else the machine ran while we measured: per-core CPU use from /proc.

A live figure is only as good as the machine was quiet. :class:`LoadMeter` samples,
in a background thread, every core's busy ticks (``/proc/stat``: user, nice, system,
irq, softirq, steal) and the ticks of this process and all its descendants (the
engine-core and worker processes: ``utime + stime + cutime + cstime`` from
``/proc/<pid>/stat``, so a child reaped between two samples is still counted once,
in its parent). Foreign load on the engine's cores is their busy ticks minus ours,
which holds when our whole process tree is pinned to those cores (the benchmark
pins it); busy ticks on the other cores are all foreign. At the end it names the
foreign processes that used the most CPU (``/proc/<pid>/stat`` before and after).

Figures are in percent of the engine's cores (100 = every engine core busy with
someone else's work). Linux only; elsewhere the meter records nothing
(``available`` False) rather than failing. Pure Python.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PROC = Path("/proc")
CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
SAMPLE_S = 0.5  # the sampler's period
TOP = 5  # foreign processes named per measurement


def _core_ticks() -> dict[int, tuple[int, int]]:
    """core -> (busy, total) ticks since boot."""
    out: dict[int, tuple[int, int]] = {}
    for line in (PROC / "stat").read_text().splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        name, *values = line.split()
        ticks = [int(v) for v in values[:8]]
        user, nice, system, idle, iowait, irq, softirq, steal = ticks + [0] * (8 - len(ticks))
        busy = user + nice + system + irq + softirq + steal
        out[int(name[3:])] = (busy, busy + idle + iowait)
    return out


def _stat(pid: int) -> tuple[int, str, int, int] | None:
    """(ppid, comm, own ticks, reaped children's ticks) of one process, or None."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # comm may hold spaces and parentheses: it ends at the last ')'.
    head, _, rest = text.rpartition(")")
    comm = head.partition("(")[2]
    f = rest.split()
    # Fields after comm, 0-based: 1 ppid, 11 utime, 12 stime, 13 cutime, 14 cstime.
    return int(f[1]), comm, int(f[11]) + int(f[12]), int(f[13]) + int(f[14])


def _all_pids() -> list[int]:
    return [int(p.name) for p in PROC.iterdir() if p.name.isdigit()]


def process_ticks() -> dict[int, tuple[int, str, int, int]]:
    """Every process: pid -> (ppid, comm, ticks, children's ticks)."""
    out = {}
    for pid in _all_pids():
        s = _stat(pid)
        if s is not None:
            out[pid] = s
    return out


def tree(root: int, table: dict[int, tuple[int, str, int, int]]) -> set[int]:
    """``root`` and every descendant of it in ``table``."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, *_rest) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid in out:
            continue
        out.add(pid)
        todo.extend(children.get(pid, ()))
    return out


@dataclass(frozen=True, slots=True)
class Reading:
    mono: float
    cores: dict[int, tuple[int, int]]  # core -> (busy, total)
    own: int  # ticks of our process tree (reaped children included)


def read(root: int) -> Reading:
    table = process_ticks()
    mine = tree(root, table)
    own = sum(table[p][2] + table[p][3] for p in mine)
    return Reading(time.monotonic(), _core_ticks(), own)


@dataclass(frozen=True, slots=True)
class Window:
    """CPU use between two readings, in percent of the engine's cores."""

    seconds: float
    foreign_pct: float  # others' work on the engine's cores
    own_pct: float  # ours (the engine, its front end and this sampler)
    elsewhere_pct: float  # busy time on the other cores, in percent of one core each
    per_core_busy_pct: dict[int, float]


def window(a: Reading, b: Reading, cores: tuple[int, ...]) -> Window:
    mine = [c for c in cores if c in a.cores and c in b.cores]
    span = {c: max(b.cores[c][1] - a.cores[c][1], 1) for c in b.cores if c in a.cores}
    busy = {c: b.cores[c][0] - a.cores[c][0] for c in span}
    capacity = sum(span[c] for c in mine) or 1
    own = max(b.own - a.own, 0)
    foreign = max(sum(busy[c] for c in mine) - own, 0)
    others = [c for c in span if c not in mine]
    elsewhere = sum(busy[c] for c in others) / max(sum(span[c] for c in others), 1)
    return Window(
        seconds=b.mono - a.mono,
        foreign_pct=100.0 * foreign / capacity,
        own_pct=100.0 * own / capacity,
        elsewhere_pct=100.0 * elsewhere if others else 0.0,
        per_core_busy_pct={c: round(100.0 * busy[c] / span[c], 1) for c in sorted(span)},
    )


@dataclass
class LoadRecord:
    """What a :class:`LoadMeter` saw over one measurement."""

    available: bool
    seconds: float = 0.0
    foreign_pct: float = 0.0  # mean over the measurement
    foreign_peak_pct: float = 0.0  # the worst sampler window (SAMPLE_S * 4)
    own_pct: float = 0.0
    elsewhere_pct: float = 0.0
    per_core_busy_pct: dict[int, float] = field(default_factory=dict)
    load_avg_1m: float = 0.0
    top_foreign: list[tuple[str, float]] = field(default_factory=list)  # (comm[pid], % core)

    def to_json(self) -> dict[str, Any]:
        return {
            "available": self.available,
            "seconds": round(self.seconds, 2),
            "foreign_pct": round(self.foreign_pct, 2),
            "foreign_peak_pct": round(self.foreign_peak_pct, 2),
            "own_pct": round(self.own_pct, 2),
            "elsewhere_pct": round(self.elsewhere_pct, 2),
            "per_core_busy_pct": {str(k): v for k, v in self.per_core_busy_pct.items()},
            "load_avg_1m": round(self.load_avg_1m, 2),
            "top_foreign": [[name, round(pct, 1)] for name, pct in self.top_foreign],
        }

    @property
    def summary(self) -> str:
        if not self.available:
            return "load not measured (no /proc)"
        top = ", ".join(f"{n} {p:.0f}%" for n, p in self.top_foreign[:3]) or "none"
        return (f"foreign load {self.foreign_pct:.1f}% of the engine's cores (peak "
                f"{self.foreign_peak_pct:.0f}%), ours {self.own_pct:.0f}%; top: {top}")


def available() -> bool:
    return (PROC / "stat").is_file() and (PROC / str(os.getpid()) / "stat").is_file()


class LoadMeter:
    """``with LoadMeter(cores) as meter: ...`` then ``meter.record``.

    ``cores``: the cores the engine runs on (default: this process's affinity). Leave
    the block while the engine's processes still run: one that exited unreaped by a
    process of ours (vLLM's workers at shutdown) takes its ticks with it, and they
    would read as foreign.
    """

    def __init__(self, cores: tuple[int, ...] | None = None, root: int | None = None) -> None:
        self.cores = tuple(sorted(cores if cores is not None else os.sched_getaffinity(0)))
        self.root = os.getpid() if root is None else root
        self.record = LoadRecord(available=available())
        self._readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._procs_before: dict[int, tuple[int, str, int, int]] = {}

    def __enter__(self) -> LoadMeter:
        if not self.record.available:
            return self
        self._procs_before = process_ticks()
        self._readings = [read(self.root)]
        self._thread = threading.Thread(target=self._loop, name="nightjar-load", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            try:
                self._readings.append(read(self.root))
            except OSError:  # a /proc entry vanished mid-read: skip this sample
                continue

    def __exit__(self, *exc: object) -> None:
        if not self.record.available or self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._readings.append(read(self.root))
        self.record = self._summarise(process_ticks())

    def _summarise(self, procs_after: dict[int, tuple[int, str, int, int]]) -> LoadRecord:
        rs = self._readings
        whole = window(rs[0], rs[-1], self.cores)
        # Peaks over windows of ~2 s: single 0.5 s windows are a few ticks each.
        stride = 4
        peaks = [window(rs[i], rs[min(i + stride, len(rs) - 1)], self.cores).foreign_pct
                 for i in range(0, max(len(rs) - 1, 1), stride)]
        mine = tree(self.root, procs_after) | tree(self.root, self._procs_before)
        seconds = max(whole.seconds, 1e-9)
        used = []
        for pid, (_ppid, comm, ticks, _children) in procs_after.items():
            if pid in mine:
                continue
            before = self._procs_before.get(pid)
            delta = ticks - (before[2] if before is not None and before[1] == comm else 0)
            if delta > 0:
                used.append((f"{comm}[{pid}]", 100.0 * delta / CLK_TCK / seconds))
        used.sort(key=lambda x: -x[1])
        return LoadRecord(
            available=True,
            seconds=whole.seconds,
            foreign_pct=whole.foreign_pct,
            foreign_peak_pct=max(peaks, default=whole.foreign_pct),
            own_pct=whole.own_pct,
            elsewhere_pct=whole.elsewhere_pct,
            per_core_busy_pct=whole.per_core_busy_pct,
            load_avg_1m=os.getloadavg()[0],
            top_foreign=used[:TOP],
        )
