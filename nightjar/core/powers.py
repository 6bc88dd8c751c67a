"""Integer powers of arrays that come out the same on every CPU.

numpy's array ``**`` (and ``np.power``) runs Intel's SVML kernels on AVX-512 machines
and the C library's ``pow`` elsewhere; the two differ in the last bit, and a policy
that ranks ``a_i^j`` (tetris) or an oracle that compares their sums then decides
differently on a tie, so one seed gave two runs (tests/golden, an AMD CI machine).
A product of doubles is exactly rounded by IEEE 754 on every machine, so powers built
by repeated multiplication are bit-identical everywhere.
"""

from __future__ import annotations

import numpy as np


def powers(base: np.ndarray, n: int) -> np.ndarray:
    """``base[:, None] ** [1, 2, ..., n]``, row per element of ``base`` (float64)."""
    b = np.asarray(base, dtype=float)
    out = np.empty((b.shape[0], n))
    if n:
        out[:, 0] = b
        for j in range(1, n):
            np.multiply(out[:, j - 1], b, out=out[:, j])
    return out
