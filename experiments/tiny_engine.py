"""The engine the step-cost experiments share: the default tiny target alone.

``frontend_cost.py``, ``churn_cost.py``, ``idle_wake.py`` and ``batch_extrapolation.py``
each build the tiny pair in a fresh folder and run the target with no drafter under
``nospec``, its scheduler writing a step log they read back (the step times the
profiler and the validator use). Imported as a sibling script, after
``nightjar.live.engine_spec.prepare_env``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any


def nospec_engine(prefix: str, max_num_seqs: int, **limits: Any) -> tuple[Any, Path]:
    """(EngineSpec, step-log path) for the tiny target under ``nospec``; ``limits`` go
    to the spec (``max_num_batched_tokens=...``)."""
    from nightjar.live.engine_spec import EngineSpec
    from nightjar.live.settings import LiveSettings
    from nightjar.live.tiny import build

    work = Path(tempfile.mkdtemp(prefix=prefix))
    models = build(work / "models")
    log = work / "steps.jsonl"
    spec = EngineSpec(str(models.target), None,
                      LiveSettings(policy="nospec", gamma_max=0, step_log=str(log)),
                      max_num_seqs=max_num_seqs, speculate=False, **limits)
    return spec, log
