"""Cells of a profile's decode table that contradict the cost model's shape.

A decode step does strictly more work at a larger batch or a longer speculation, so its
time cannot fall when either grows. A measured table can still say so: each cell is a
median over a few steps, and on a loaded machine one engine can run seconds after
another at a different load (issue 15: a profile measured at load ~10 with one repeat
had B = 64, context 512 at 861 / 775 / 2132 ms for gamma 1 / 2 / 3, and the simulator
priced gamma-3 steps there 39% dearer than the live engine ran them). Most such cells
are noise; a few recur across profiles (B = 1 dearer than B = 4 at gamma 0, gamma 1
dearer than gamma 2 at B = 1, in two profiles of the tiny CPU pair) and may be an
engine effect or the order of measurement. Either way the simulator prices what the
table says: this lists them so a user re-measures (more ``--repeats``, a quieter
machine) before trusting them.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

# A later cell this much cheaper is reported; smaller dips are within a cell's usual
# spread and say nothing.
TOLERANCE = 0.10


@dataclass(frozen=True, slots=True)
class Inversion:
    axis: str  # "gamma" or "batch": the one that grew
    batch_size: int
    gamma: int
    context_len: float
    step_ms: float
    next_value: int  # the larger gamma or batch size
    next_ms: float

    def describe(self) -> str:
        if self.axis == "gamma":
            return (f"B={self.batch_size} context={self.context_len:g}: gamma {self.gamma} "
                    f"{self.step_ms:.1f} ms > gamma {self.next_value} {self.next_ms:.1f} ms")
        return (f"gamma {self.gamma} context={self.context_len:g}: B={self.batch_size} "
                f"{self.step_ms:.1f} ms > B={self.next_value} {self.next_ms:.1f} ms")


def inversions(data: dict[str, Any], tolerance: float = TOLERANCE) -> list[Inversion]:
    """Neighbouring cells of ``data["decode"]`` (rows ``[B, gamma, context, step_ms,
    ...]``) where the larger gamma or batch is more than ``tolerance`` cheaper."""
    step = {(int(r[0]), int(r[1]), float(r[2])): float(r[3]) for r in data.get("decode", [])}
    bs = sorted({k[0] for k in step})
    gs = sorted({k[1] for k in step})
    cs = sorted({k[2] for k in step})
    found = []
    for c in cs:
        for b in bs:
            for g, g2 in pairwise(gs):
                a, z = step.get((b, g, c)), step.get((b, g2, c))
                if a is not None and z is not None and z < a * (1 - tolerance):
                    found.append(Inversion("gamma", b, g, c, a, g2, z))
        for g in gs:
            for b, b2 in pairwise(bs):
                a, z = step.get((b, g, c)), step.get((b2, g, c))
                if a is not None and z is not None and z < a * (1 - tolerance):
                    found.append(Inversion("batch", b, g, c, a, b2, z))
    return found


def prefill_dips(data: dict[str, Any], tolerance: float = TOLERANCE) -> list[str]:
    """Prefill rows where more prompt tokens cost more than ``tolerance`` less."""
    rows = sorted((int(r[0]), float(r[1])) for r in data.get("prefill", []))
    return [f"prefill {n2} tokens {t2:.1f} ms < {n1} tokens {t1:.1f} ms"
            for (n1, t1), (n2, t2) in pairwise(rows) if t2 < t1 * (1 - tolerance)]


def parts_above_step(data: dict[str, Any], tolerance: float = TOLERANCE) -> list[str]:
    """Measured decode cells whose draft_ms + verify_ms exceed step_ms by more than
    ``tolerance``. Each column is a median over steps, and medians of parts need not
    sum to the median of the whole, so a measured table may say so a little; a model
    may not (:mod:`nightjar.profile.format` refuses that)."""
    if data.get("source") != "measured":
        return []
    return [f"B={int(r[0])} gamma {int(r[1])} context={float(r[2]):g}: step {float(r[3]):.1f}"
            f" ms < draft + verify {float(r[4]) + float(r[5]):.1f} ms"
            for r in data.get("decode", [])
            if float(r[4]) + float(r[5]) > float(r[3]) * (1 + tolerance)]


def warning(data: dict[str, Any]) -> str | None:
    """One line for the user, or None when the table is monotone within the tolerance."""
    found = inversions(data)
    other = prefill_dips(data) + parts_above_step(data)
    if not found and not other:
        return None
    parts = []
    if found:
        shown = "; ".join(i.describe() for i in found[:4])
        more = f" (and {len(found) - 4} more)" if len(found) > 4 else ""
        parts.append(f"{len(found)} decode cells are cheaper than a smaller gamma or batch "
                     f"(a larger gamma or batch does more work): {shown}{more}")
    if other:
        more = f" (and {len(other) - 4} more)" if len(other) > 4 else ""
        parts.append(f"{len(other)} cells contradict the cost model: "
                     f"{'; '.join(other[:4])}{more}")
    name = data.get("name", "?")
    return (f"warning: profile {name}: " + "; ".join(parts) + " -- re-measure with more "
            "--repeats on a quieter machine before trusting them")


class ProfileWarning(UserWarning):
    """A profile that loads but whose table contradicts the cost model (measured noise)."""
