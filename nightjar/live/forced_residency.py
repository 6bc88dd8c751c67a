"""The test hook that forces residency moves at given engine steps or times."""

from __future__ import annotations

from nightjar.errors import NightjarInputError


def parse_forced_residency(spec: str | None) -> tuple[dict[int, str], dict[int, str]]:
    """``"40:offload,t800:reload"`` -> ({40: "offload"}, {800: "reload"}): engine
    steps, or milliseconds after the first step when prefixed with ``t``."""
    by_step: dict[int, str] = {}
    by_ms: dict[int, str] = {}
    for item in (spec or "").split(","):
        if not item.strip():
            continue
        key, _, action = item.strip().partition(":")
        try:
            if key.startswith("t"):
                by_ms[int(key[1:])] = action.strip()
            else:
                by_step[int(key)] = action.strip()
        except ValueError:
            raise NightjarInputError(
                f"--forced-residency wants [t]N:offload|reload,..., got {item!r}"
            ) from None
    return by_step, by_ms
