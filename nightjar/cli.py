"""The ``nightjar`` command line: dispatches to ``nightjar.commands.*``."""

from __future__ import annotations

import argparse
import importlib
import re
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from nightjar import __version__
from nightjar.errors import NightjarInputError, one_line
from nightjar.interrupts import Interrupted, signals_as_interrupts
from nightjar.results.provenance import command_line

# Sub-command modules, in the order ``--help`` lists them.
COMMANDS = (
    "sim", "compare", "sweep", "live", "bench", "profile", "schedule", "validate", "trace",
    "export",
)


_ROLE = re.compile(r":[a-z]+:`~?([^`]*)`")  # Sphinx roles such as :mod:`nightjar.sim`


def plain(text: str) -> str:
    """Help text without reStructuredText markup (docstrings double as descriptions)."""
    return _ROLE.sub(r"\1", text).replace("``", "")


class _HelpFormatter(argparse.HelpFormatter):
    """Shows each option's default, and help without reStructuredText markup."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help
        if text is None or "default" in text or not action.option_strings:
            return text
        if action.default is None or action.default is False or action.default == []:
            return text
        if action.default is argparse.SUPPRESS:
            return text
        return f"{text} (default: %(default)s)"

    def _format_text(self, text: str) -> str:
        return super()._format_text(plain(text))

    def _expand_help(self, action: argparse.Action) -> str:
        return plain(super()._expand_help(action))


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line and exit code 2 (no usage dump)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


class _Version(argparse.Action):
    """``--version``, with how the simulator was built: told only when asked, since
    finding out imports it."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from nightjar.sim import COMPILED

        build = "compiled with mypyc" if COMPILED else "pure Python"
        print(f"nightjar {__version__} (simulator: {build})")  # stdout, as argparse's own
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="nightjar", description="Adaptive speculative decoding for LLM serving."
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="show the version and whether the simulator is compiled")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"nightjar.commands.{name}")
        module.add_parser(sub)
    return parser


# Sub-commands that pass the flags they do not own to vLLM's parser (nightjar.live.vllm_args).
PASS_THROUGH = ("live",)


def _dashes(arg: str) -> str:
    """``--max_num_seqs=8`` -> ``--max-num-seqs=8``, as vLLM's parser reads flags."""
    if not arg.startswith("--"):
        return arg
    name, eq, value = arg.partition("=")
    return name.replace("_", "-") + eq + value


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse ``argv``; for a pass-through command keep the unknown flags and those after
    ``--`` (``vllm_flags``, ``server_args``), for the others refuse them as argparse does."""
    argv = list(sys.argv[1:] if argv is None else argv)
    head, tail = argv, []
    if "--" in argv:
        cut = argv.index("--")
        head, tail = argv[:cut], argv[cut + 1:]
    if head and head[0] in PASS_THROUGH:
        head = [_dashes(a) for a in head]
    args, unknown = parser.parse_known_args(head)
    if getattr(args, "command", None) in PASS_THROUGH:
        args.vllm_flags, args.server_args = unknown, tail
        return args
    if unknown or tail:
        parser.error(f"unrecognized arguments: {' '.join(unknown + tail)}")
    return args


def _show_warning(message: Warning | str, category: type[Warning], filename: str,
                  lineno: int, file: Any = None, line: str | None = None) -> None:
    """A Python warning as the CLI's one line (``nightjar: warning: ...``)."""
    text = one_line(str(message))
    if not text.startswith("warning:"):
        text = f"warning: {text}"
    print(f"nightjar: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, argv)
    # What a run folder records as its command (nightjar.results.provenance).
    args.invocation = command_line(argv)
    with warnings.catch_warnings(), signals_as_interrupts():
        warnings.simplefilter("always", UserWarning)
        warnings.showwarning = _show_warning
        try:
            code: int = args.func(args)
        except NightjarInputError as exc:
            print(f"nightjar: error: {exc}", file=sys.stderr)
            return 2
        except Interrupted as exc:
            print(f"nightjar: interrupted ({signal.Signals(exc.signum).name})", file=sys.stderr)
            return 128 + exc.signum
        except KeyboardInterrupt:
            print("nightjar: interrupted", file=sys.stderr)
            return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
