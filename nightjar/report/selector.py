"""A policy selector instead of spaghetti: beyond ``MAX_OVERLAY`` policies on one axis,
the figure draws one chosen policy (and the oracle, the yardstick) in colour and every
other policy thin and grey behind it, with a dropdown to choose another (or overlay
them all). The grey lines keep the field in view; the legend still hides and isolates.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from nightjar.report.colors import ORACLE
from nightjar.report.style import CONTEXT, MAX_OVERLAY

ALL = "all, overlaid"


def needs_selector(policies: Sequence[str]) -> bool:
    return len(set(policies)) > MAX_OVERLAY


def _state(fig: go.Figure, owners: Sequence[str | None], colors: dict[str, str],
           pick: str | None) -> dict[str, list[Any]]:
    color: list[Any] = []
    width: list[Any] = []
    for trace, owner in zip(fig.data, owners, strict=True):
        if owner is None:  # not a policy's line (e.g. the arrivals)
            color.append(trace.line.color)
            width.append(trace.line.width)
        elif pick is None or owner in (pick, ORACLE):
            color.append(colors[owner])
            width.append(2.2 if owner == pick else 1.4)
        else:
            color.append(CONTEXT)
            width.append(0.9)
    return {"line.color": color, "line.width": width}


def add_selector(fig: go.Figure, owners: Sequence[str | None], colors: dict[str, str],
                 choose: str) -> None:
    """Highlight ``choose``; ``owners[i]`` is the policy whose line trace ``i`` is."""
    policies = list(dict.fromkeys(o for o in owners if o is not None))
    buttons = [{"label": p, "method": "restyle", "args": [_state(fig, owners, colors, p)]}
               for p in policies]
    buttons.append({"label": ALL, "method": "restyle",
                    "args": [_state(fig, owners, colors, None)]})
    first = _state(fig, owners, colors, choose)
    for trace, c, w in zip(fig.data, first["line.color"], first["line.width"], strict=True):
        trace.line.color, trace.line.width = c, w
    top = fig.layout.margin.t or 36
    fig.update_layout(
        updatemenus=[{
            "buttons": buttons, "active": policies.index(choose), "type": "dropdown",
            "direction": "down", "showactive": True, "x": 0.09, "xanchor": "left",
            "y": 1.0, "yanchor": "bottom", "pad": {"b": 26}, "font": {"size": 11},
        }],
        margin={"t": top + 34},
    )
    fig.add_annotation(text="highlight:", x=0, xanchor="left", y=1.0, yanchor="bottom",
                       xref="paper", yref="paper", showarrow=False, yshift=30,
                       font={"size": 11, "color": "#555"})
