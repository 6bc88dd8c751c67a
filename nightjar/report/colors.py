"""One colour per policy name, the same in every report (sim, live, sweep, paper).

A reader who learned that ``nightjar+`` is purple in one report must find it purple in
the next, whatever else ran beside it, so colours are looked up by name rather than
handed out by position. The registered policies (and each fixed gamma up to 8) have
their own colour; a spec that has none takes its base policy's (``nightjar+:slo`` ->
``nightjar+``) unless that colour is already drawn in the same figure, and otherwise a
colour chosen from a hash of the spec in :data:`EXTRA`, moved on to the next free one
on a collision. The oracle, the yardstick, is dark grey and drawn dashed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

ORACLE = "oracle"
ORACLE_COLOR = "#333333"
# Distinct hues (Tableau 20 and a few more); families share a hue range: the fixed
# lengths are warm, the paper's two bandits green/teal, ours purple.
NAMED: dict[str, str] = {
    "nospec": "#4e79a7",
    "fixed:1": "#f28e2b",
    "fixed:2": "#edc948",
    "fixed:3": "#e15759",
    "fixed:4": "#ff9da7",
    "fixed:5": "#d4a017",
    "fixed:6": "#c85200",
    "fixed:7": "#a3481d",
    "fixed:8": "#7a1f1f",
    "schedule": "#9c755f",
    "nightjar": "#59a14f",
    "nightjar-code": "#2a9d8f",
    "nightjar+": "#8e44ad",
    "dsd": "#17becf",
    "banditspec": "#8c564b",
    "banditspec-exp3": "#bcbd22",
    "tetris": "#1f3a93",
    "sglang": "#d37295",
    ORACLE: ORACLE_COLOR,
}
# For specs without a colour of their own (and variants whose base colour is taken).
EXTRA = (
    "#499894", "#b6992d", "#86bcb6", "#f1ce63", "#a0cbe8", "#ffbe7d", "#d4a6c8",
    "#fabfd2", "#79706e", "#6b8e23", "#b07aa1", "#e377c2", "#98df8a", "#ff7f0e",
    "#aec7e8", "#c49c94",
)


def base_name(spec: str) -> str:
    """``nightjar+:slo`` -> ``nightjar+``; ``nightjar+ +offload`` -> ``nightjar+``."""
    return spec.strip().split(" ")[0].split(":")[0]


def own_color(spec: str) -> str | None:
    """The colour this spec always gets, or None when it has none of its own."""
    return NAMED.get(spec.strip())


def policy_colors(policies: Iterable[str]) -> dict[str, str]:
    """A colour per distinct policy, fixed by name (see the module docstring)."""
    names = list(dict.fromkeys(policies))
    out: dict[str, str] = {}
    taken: set[str] = set()
    # Specs with a colour of their own first, so a variant never takes it from them.
    for name in names:
        color = own_color(name)
        if color is not None and color not in taken:
            out[name] = color
            taken.add(color)
    for name in names:
        if name in out:
            continue
        base = NAMED.get(base_name(name))
        if base is not None and base not in taken and not base_name(name).startswith("fixed"):
            out[name] = base
        else:
            start = int(hashlib.sha1(name.encode()).hexdigest(), 16) % len(EXTRA)
            free = [EXTRA[(start + k) % len(EXTRA)] for k in range(len(EXTRA))]
            out[name] = next((c for c in free if c not in taken), free[0])
        taken.add(out[name])
    return out
