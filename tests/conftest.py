"""Every test process runs numpy's portable kernels, not its AVX-512 ones.

numpy's float64 ``log``, ``exp`` and ``power`` run Intel's SVML on AVX-512 machines and
the C library elsewhere, which differ in the last bit. The simulator avoids them where
a last bit could change a decision (nightjar.core.powers; a sum, not BLAS's dot), but
the golden digests hash every float a run writes: with AVX-512 off, an Intel and an
AMD machine compute them alike. Set before numpy is imported (pytest loads this file
first; its xdist workers inherit the environment).
"""

from __future__ import annotations

import os
import sys

# numpy 2.4 names the AVX-512 group X86_V4; older releases name its parts.
_AVX512 = "X86_V4 AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR"
if "numpy" not in sys.modules:
    os.environ.setdefault("NPY_DISABLE_CPU_FEATURES", _AVX512)
