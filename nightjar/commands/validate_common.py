"""What both forms of ``nightjar validate`` share: the live run's fields, the binding
check, the terminal table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from nightjar.errors import NightjarInputError

LIVE_RUN_FIELDS = ("seed", "gamma_max", "draft_kv", "engine", "max_num_seqs",
                   "max_num_batched_tokens")


def live_offload(runs: list[Any]) -> str:
    """The elastic-memory setting a simulation of these live runs replays: ``on`` where
    any ran with the memory controller (``elastic_memory`` in its summary), else
    ``off`` (runs written before the key existed ran without it: the old default)."""
    return "on" if any(r.extra.get("elastic_memory", 0.0) > 0 for r in runs) else "off"


def run_bindings(folder: Path) -> list[Any]:
    """The CPU bindings the runs in ``folder`` recorded (``nightjar live`` run folders)."""
    import json

    from nightjar.live.binding import binding_from_extras

    summaries = [folder / "summary.json"] if (folder / "summary.json").is_file() else sorted(
        folder.glob("*/summary.json"))
    out = []
    for path in summaries:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        numbers = {k: float(v) for k, v in data.items() if isinstance(v, int | float)}
        out.append(binding_from_extras(numbers))
    return out


def check_binding(profile: Any, bindings: list[Any], allow: bool, console: Console) -> None:
    """Refuse (one line) a measured profile and live runs made under different CPU thread
    bindings, unless ``allow``; note where either side did not record one."""
    from nightjar.live.binding import binding_from_json

    if profile.source != "measured":
        return
    measured = (profile.to_json().get("measured") or {}).get("cpu_binding")
    recorded = binding_from_json(measured)
    known = [b for b in bindings if b is not None]
    if recorded is None or len(known) < len(bindings) or not bindings:
        console.print("note: the CPU thread binding of the profile or of a live run is not "
                      "recorded (made before bindings were): check they match by hand")
        return
    other = next((b for b in known if not b.same_as(recorded)), None)
    if other is None:
        return
    text = (f"the profile was measured with {recorded.label} but a live run ran with "
            f"{other.label}: the profile prices that run's steps wrong")
    if not allow:
        raise NightjarInputError(text + " (re-measure one of them, or give --any-binding)")
    console.print(f"[bold red]WARNING:[/] {text}")


def table(frame: Any, title: str) -> Table:
    table = Table(title=title)
    for col in frame.columns:
        table.add_column(str(col), justify="right")
    for row in frame.itertuples(index=False):
        table.add_row(*(f"{v:.4g}" if isinstance(v, float) else str(v) for v in row))
    return table
