"""A run's memory setting carried on its policy spec: ``fixed:3@offload=off``.

The full-system yardstick (:mod:`nightjar.results.alternatives`) compares a run with
the static alternatives a user could have served the same load with, each with and
without elastic draft memory. Those alternatives share one run set (one seed, one
trace, one command), so the memory setting that differs between them rides on the
spec: ``SPEC@offload=on|off`` runs ``SPEC`` with elastic memory forced on or off,
whatever the run's ``--offload``. A spec without ``@`` runs as the command says.
Pure Python.
"""

from __future__ import annotations

from nightjar.errors import NightjarInputError

_KEY = "offload"


def split_variant(spec: str) -> tuple[str, str | None]:
    """``"fixed:3@offload=off"`` -> ``("fixed:3", "off")``; ``"fixed:3"`` -> (it, None)."""
    base, sep, rest = spec.partition("@")
    if not sep:
        return spec, None
    key, eq, value = rest.partition("=")
    if key != _KEY or not eq or value not in ("on", "off"):
        raise NightjarInputError(
            f"policy {spec!r}: a run variant is SPEC@offload=on or SPEC@offload=off")
    return base, value


def with_offload(spec: str, mode: str) -> str:
    """``spec`` run with elastic memory ``mode`` (``on`` or ``off``)."""
    return f"{split_variant(spec)[0]}@{_KEY}={mode}"
