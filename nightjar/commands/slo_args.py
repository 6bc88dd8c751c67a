"""The SLO limits a command's ``--slo-ttft`` / ``--slo-tpot`` flags give, checked (the
flags themselves are fields of the commands' settings types)."""

from __future__ import annotations

from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError


def make_slo(ttft_s: float, tpot_s: float) -> Slo:
    """An :class:`Slo`, or a one-line input error naming the bad limit."""
    try:
        return Slo(ttft_s=float(ttft_s), tpot_s=float(tpot_s))
    except (ValueError, TypeError) as exc:
        raise NightjarInputError(f"--slo-ttft/--slo-tpot: {exc} (got {ttft_s}, {tpot_s})") from None
