"""The ``--slo-ttft`` / ``--slo-tpot`` flags shared by ``sim``, ``live`` and ``sweep``."""

from __future__ import annotations

import argparse
from typing import Any

from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError


def add_slo_args(parser: Any) -> None:
    default = Slo()
    parser.add_argument(
        "--slo-ttft", type=float, default=default.ttft_s, metavar="S",
        help=f"time-to-first-token limit for goodput, seconds (default {default.ttft_s:g})",
    )
    parser.add_argument(
        "--slo-tpot", type=float, default=default.tpot_s, metavar="S",
        help=f"time-per-output-token limit for goodput, seconds (default {default.tpot_s:g})",
    )


def slo_from_args(args: argparse.Namespace) -> Slo:
    return make_slo(args.slo_ttft, args.slo_tpot)


def make_slo(ttft_s: float, tpot_s: float) -> Slo:
    """An :class:`Slo`, or a one-line input error naming the bad limit."""
    try:
        return Slo(ttft_s=float(ttft_s), tpot_s=float(tpot_s))
    except (ValueError, TypeError) as exc:
        raise NightjarInputError(f"--slo-ttft/--slo-tpot: {exc} (got {ttft_s}, {tpot_s})") from None
