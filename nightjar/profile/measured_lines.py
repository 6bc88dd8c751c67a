"""What a profile's ``measured`` header says about where its cells came from, as the
lines ``nightjar profile --show`` prints: cells fitted from runs (and the base's), and
decode batches the KV pool stopped short of the engine's cap."""

from __future__ import annotations

from typing import Any


def measured_lines(measured: Any) -> list[str]:
    if not isinstance(measured, dict):
        return []
    return [line for line in (_fit(measured.get("fit")), _cap(measured.get("batch_cap")))
            if line]


def _fit(fit: Any) -> str:
    if not isinstance(fit, dict) or not isinstance(fit.get("cells"), dict):
        return ""
    parts = [f"{table} {cells[0]} of {cells[1]}" for table, cells in fit["cells"].items()
             if isinstance(cells, list) and len(cells) == 2 and cells[1]]
    runs = fit.get("runs")
    count = len(runs) if isinstance(runs, list) else 0
    return (f"fitted from {count} run folder(s)' steps: cells {', '.join(parts)}; the rest "
            f"are {fit.get('base', 'the base')}'s (measured.fit lists each)")


def _cap(cap: Any) -> str:
    if not isinstance(cap, dict) or cap.get("largest_batch") == cap.get("max_num_seqs"):
        return ""
    return (f"decode batches measured up to {cap.get('largest_batch')}, what the KV pool "
            f"({cap.get('pool_tokens')} tokens) held; the engine's cap "
            f"{cap.get('max_num_seqs')} is priced along the last segment")
