"""The bound's program keeps only the states that can still win (nightjar.sim.bound):
its value must be the full program's, bit for bit, capped stretch included."""

from __future__ import annotations

import numpy as np
import pytest

from nightjar.sim.bound import Program


def _full(on: np.ndarray, off: np.ndarray, cap: int) -> float:
    """Every state 0..cap, walked step by step: the program as first written."""
    val = np.full(cap + 1, np.inf)
    val[0] = 0.0
    for on_t, off_t in zip(on, off, strict=True):
        nxt = np.empty_like(val)
        nxt[1:] = val[:-1] + off_t
        if val[cap] < val[cap - 1]:  # the capped stretch absorbs
            nxt[cap] = val[cap] + off_t
        nxt[0] = np.min(val + on_t)
        val = nxt
    return float(val.min())


@pytest.mark.parametrize("cap", [1, 2, 3, 8])
@pytest.mark.parametrize("seed", range(6))
def test_the_frontier_walk_equals_the_full_program(cap: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    steps = 600
    off = rng.uniform(0.5, 1.5, steps)
    # Speculating costs about what gamma 0 does, plus a rebuild that grows with the
    # stretch (non-decreasing in l, as every real one): many states stay in play.
    base = rng.uniform(0.3, 1.6, steps)
    growth = np.cumsum(rng.uniform(0.0, 0.2, (steps, cap + 1)), axis=1)
    growth[:, 0] = 0.0
    on = base[:, None] + growth
    program = Program(cap)
    for lo in range(0, steps, 97):  # in chunks, as the recorder streams them
        sl = slice(lo, lo + 97)
        chunk = on[sl]
        program.walk(off[sl].tolist(), chunk[:, 0].tolist(),
                     lambda i, stretch, chunk=chunk: float(chunk[i, stretch]))
    assert program.value() == _full(on, off, cap)


def test_a_long_stretch_is_capped_and_kept() -> None:
    # Gamma 0 always cheaper and every rebuild dear: the best is one long stretch, past cap.
    steps, cap = 50, 4
    off = np.full(steps, 1.0)
    on = np.full((steps, cap + 1), 10.0)
    program = Program(cap)
    program.walk(off.tolist(), on[:, 0].tolist(), lambda i, stretch: float(on[i, stretch]))
    assert program.value() == _full(on, off, cap) == 50.0
