"""Log ratios (measured / priced) spread over a profile table's cells: the evidence a
fitted profile (:mod:`nightjar.fidelity.fit`) corrects each cell by.

The corrections are a least-squares fit through the lookup's own interpolation, not
each cell's mean of what reached it. A step between two cells says what their blend
costs; where the error grows along a segment (decode steps on the CPU engine cost 3%
more than priced near B = 32, 11-15% more near 64), a per-cell mean lets the many
steps near one end set the far cell too, and the far end stays priced cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

# What the base's value of a cell is worth, in steps: one or two steps cannot move a
# cell far from a measured base, a few hundred set it.
PRIOR_STEPS = 8.0


@dataclass
class RatioGrid:
    """Log ratios measured / base spread over a grid's cells by bilinear weights: the
    interpolation a lookup at (x, y) uses (clamped to the grid's edges, as lookups are).

    Invariant: ``w``, ``wr`` and ``wr2`` hold, per cell, the sums of weight, weight x
    log ratio and weight x log ratio squared over every sample added; ``gram`` holds,
    per pair of cells (flattened, row-major), the sum of their weights' products.
    """

    xs: Sequence[float]
    ys: Sequence[float]
    w: np.ndarray = field(init=False)
    wr: np.ndarray = field(init=False)
    wr2: np.ndarray = field(init=False)
    gram: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        shape = (len(self.xs), len(self.ys))
        self.w, self.wr, self.wr2 = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        self.gram = np.zeros((self.w.size, self.w.size))

    def add(self, x: np.ndarray, y: np.ndarray, log_ratio: np.ndarray) -> None:
        (i, a), (j, b) = _segments(self.xs, x), _segments(self.ys, y)
        corners = []  # per sample, each of its four cells (flat index) and weight
        for di, wi in ((0, 1.0 - a), (1, a)):
            for dj, wj in ((0, 1.0 - b), (1, b)):
                ii = np.minimum(i + di, len(self.xs) - 1)
                jj = np.minimum(j + dj, len(self.ys) - 1)
                wt = wi * wj
                np.add.at(self.w, (ii, jj), wt)
                np.add.at(self.wr, (ii, jj), wt * log_ratio)
                np.add.at(self.wr2, (ii, jj), wt * log_ratio * log_ratio)
                corners.append((ii * len(self.ys) + jj, wt))
        for ka, wa in corners:
            for kb, wb in corners:
                np.add.at(self.gram, (ka, kb), wa * wb)

    def correction(self) -> np.ndarray:
        """Per cell, the factor to multiply the base by (1 where nothing reached it).

        The log factors whose interpolation best fits every sample in least squares,
        each held to its cell's mean log ratio as if by PRIOR_STEPS samples (where the
        samples cannot tell two cells apart, every step at one blend of them as a run's
        contexts can be, each keeps its mean; where they can, they follow the samples);
        then pulled toward 0, the base, as if the base were PRIOR_STEPS samples at it.
        A cell that only its own grid point's samples reached gets their mean, shrunk.
        """
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(self.w > 0, self.wr / self.w, 0.0)
        anchored = self.gram + PRIOR_STEPS * np.eye(self.w.size)
        fit: np.ndarray = np.linalg.solve(anchored, self.wr.ravel() + PRIOR_STEPS * mean.ravel())
        factor: np.ndarray = np.exp(fit.reshape(self.w.shape) * self.w / (self.w + PRIOR_STEPS))
        return factor

    def stderr(self) -> np.ndarray:
        """Per cell, the standard error of the mean log ratio (NaN below 2 samples' weight)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = self.wr / self.w
            var = np.maximum(self.wr2 / self.w - mean * mean, 0.0)
            return np.where(self.w >= 2.0, np.sqrt(var / self.w), np.nan)


def _segments(grid: Sequence[float], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per x, the index i of its grid segment and its weight toward grid[i + 1], clamped."""
    g = np.asarray(grid, dtype=float)
    if len(g) == 1:
        return np.zeros(len(x), dtype=int), np.zeros(len(x))
    xc = np.clip(np.asarray(x, dtype=float), g[0], g[-1])
    i = np.clip(np.searchsorted(g, xc, side="right") - 1, 0, len(g) - 2)
    return i, (xc - g[i]) / (g[i + 1] - g[i])
