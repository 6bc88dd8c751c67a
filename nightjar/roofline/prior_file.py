"""``nightjar live --profile roofline:GPU``: the roofline profile of a target and its
drafter on a catalogue GPU, as a file a live engine loads its step-time prior from."""

from __future__ import annotations

import json
import tempfile

from nightjar.errors import NightjarInputError


def roofline_prior(gpu: str, target: str, draft: str | None, method: str = "draft_model"
                   ) -> str:
    """The roofline profile of this pair on a catalogue GPU, written to a temporary
    file (the engine core loads its prior by path). A drafter other than a draft model
    is derived from the target (``nightjar.roofline.drafters``). A model the roofline
    cannot read (no ``config.json``, an unsupported architecture) is a one-line error."""
    from nightjar.roofline.costs import build_profile
    from nightjar.roofline.hardware import get_gpu
    from nightjar.roofline.model_config import load_model_config

    own_model = method == "draft_model"
    if own_model and draft is None:
        raise NightjarInputError("--profile roofline:GPU needs a draft model (--draft)")
    data = build_profile(
        get_gpu(gpu), load_model_config(target),
        load_model_config(draft) if own_model and draft is not None else None,
        command=f"nightjar live --profile roofline:{gpu}", drafter=method,
    )
    fd, path = tempfile.mkstemp(prefix="nightjar-roofline-", suffix=".json")
    with open(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    return path
