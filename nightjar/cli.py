"""The ``nightjar`` command line: dispatches to ``nightjar.commands.*``."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from nightjar import __version__
from nightjar.errors import NightjarInputError

# Sub-command modules, in the order ``--help`` lists them.
COMMANDS = ("sim", "sweep", "live", "profile", "validate", "trace")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2 (no usage dump)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="nightjar", description="Adaptive speculative decoding for LLM serving."
    )
    parser.add_argument("--version", action="version", version=f"nightjar {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"nightjar.commands.{name}")
        module.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except NightjarInputError as exc:
        print(f"nightjar: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("nightjar: interrupted", file=sys.stderr)
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
