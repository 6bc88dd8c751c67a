"""Sizes, colours and axis styling shared by every figure of the report.

Every figure is at most ``WIDTH`` px wide, so the page fits a 1280 px window
(``PAGE_WIDTH`` plus the body margins) without scrolling sideways.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

PAGE_WIDTH = 1200
WIDTH = 1180
FONT = {"family": "system-ui, -apple-system, Segoe UI, sans-serif", "size": 12}
GRID = "#e6e6e6"
MUTED = "#888888"
# Policies not picked in a figure that highlights one (more than MAX_OVERLAY drawn).
CONTEXT = "#d0d0d0"
# More policies than this on one axis is spaghetti: figures switch to a selector.
MAX_OVERLAY = 4


def line_style(policy: str, color: str, oracle: str | None = "oracle") -> dict[str, Any]:
    return {"color": color, "width": 1.4, "dash": "dash" if policy == oracle else "solid"}


def base_layout(fig: go.Figure, height: int, *, legend: bool = True) -> None:
    """White background, fixed width, legend (policies) on the right."""
    fig.update_layout(
        width=WIDTH,
        height=height,
        template="plotly_white",
        font=FONT,
        margin={"t": 36, "b": 46, "l": 70, "r": 20},
        showlegend=legend,
        legend={
            "title": {"text": "policy"},
            "orientation": "v",
            "x": 1.01,
            "xanchor": "left",
            "y": 1.0,
            "yanchor": "top",
            "font": {"size": 11},
            # Policies are legend groups (one entry toggles every panel); without
            # this each group adds 10 px and a dozen policies overflow the figure.
            "tracegroupgap": 0,
        },
        hovermode="x unified",
    )
    fig.update_xaxes(gridcolor=GRID, zeroline=False, automargin=True)
    fig.update_yaxes(gridcolor=GRID, zeroline=False, automargin=True)
    # Subplot titles: bold-ish and small enough not to reach the neighbouring panel.
    fig.update_annotations(font_size=12)


def nice_ticks(top: float, n: int = 4) -> list[float]:
    """About ``n`` round tick values from 0 to ``top``."""
    if top <= 0:
        return [0.0]
    raw = top / n
    mag = 10 ** int(f"{raw:e}".split("e")[1])
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return [i * step for i in range(int(top // step) + 1)]
