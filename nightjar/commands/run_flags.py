"""Command-line flags for the fields of a settings type, and back.

``nightjar sim`` takes every field of :class:`nightjar.run.config.RunConfig`,
``nightjar validate`` the ones that describe the live run it replays (with the live
engine's defaults); ``nightjar live`` and ``nightjar bench live`` take the fields of
their option types (:class:`nightjar.live.run_options.LiveOptions`,
:class:`nightjar.live.bench.bench_options.BenchOptions`). Every flag is made here
from its field's own metadata, so a new setting needs no new flag code.
"""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from nightjar.run.config import CHOICES, RunConfig, flag_of

T = TypeVar("T")

_FIELDS = {f.name: f for f in dataclasses.fields(RunConfig)}
_TYPES = typing.get_type_hints(RunConfig)


def _kind(name: str) -> type:
    hint = _TYPES[name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else hint  # type: ignore[no-any-return]


def add_run_flags(
    parser: argparse.ArgumentParser,
    only: Collection[str] | None = None,
    defaults: Mapping[str, Any] | None = None,
    gamma_from_profile: bool = False,
) -> None:
    """One flag per field (``only`` those), with the field's default unless ``defaults``
    gives another. ``gamma_from_profile``: ``--gamma-max`` defaults to None (not given),
    for :meth:`RunConfig.within` to resolve against the run's profile."""
    for name, f in _FIELDS.items():
        if only is not None and name not in only:
            continue
        default = (defaults or {}).get(name, f.default)
        flag, text = flag_of(name), str(f.metadata["help"])
        if name == "policies":
            parser.add_argument(flag, action="append", dest=name, metavar="SPEC",
                                help=f"{text}; default: {' '.join(default)}")
        elif name == "oracle":
            # A store_false flag: its default is the field's (True), never worth printing.
            parser.add_argument(flag, dest=name, action="store_false", default=default,
                                help=text + " (by default it runs)")
        elif default is False:
            # A switch that is off unless given (--alternatives).
            parser.add_argument(flag, dest=name, action="store_true", help=text)
        elif name in CHOICES:
            parser.add_argument(flag, dest=name, choices=list(CHOICES[name]), default=default,
                                help=text)
        elif name == "gamma_max" and gamma_from_profile:
            # None: not given, so it may follow a profile whose table stops lower.
            parser.add_argument(flag, dest=name, type=int, default=None, metavar="N",
                                help=f"{text} (default: {default}, or the profile's"
                                " longest where its table stops before)")
        else:
            kind = _kind(name)
            metavar = {int: "N", float: "S"}.get(kind, "SPEC")
            parser.add_argument(flag, dest=name, type=kind, default=default, metavar=metavar,
                                help=text)


def run_config(args: argparse.Namespace, only: Collection[str] | None = None) -> RunConfig:
    """The checked :class:`RunConfig` of parsed flags (fields without a flag keep their
    defaults); errors name the flag."""
    values: dict[str, Any] = {}
    for name in _FIELDS:
        if (only is not None and name not in only) or not hasattr(args, name):
            continue
        value = getattr(args, name)
        if name == "policies":
            if value is None:
                continue
            value = tuple(value)
        elif name == "gamma_max" and value is None:
            continue  # not given: the field's default (see RunConfig.within)
        values[name] = value
    return RunConfig.build(values, spell=flag_of)



def add_option_flags(parser: argparse.ArgumentParser, cls: type) -> None:
    """One flag per field of the option type ``cls`` whose metadata names one
    (:func:`nightjar.live.run_options.option`), in field order; argument groups are
    made as their first field comes."""
    hints = typing.get_type_hints(cls)
    groups: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        meta = f.metadata
        if not meta.get("flag"):
            continue
        target: Any = parser
        if meta["group"] is not None:
            if meta["group"] not in groups:
                groups[meta["group"]] = parser.add_argument_group(meta["group"])
            target = groups[meta["group"]]
        kwargs: dict[str, Any] = {
            "dest": f.name, "help": argparse.SUPPRESS if meta["hidden"] else meta["help"]}
        if meta["metavar"] is not None:
            kwargs["metavar"] = meta["metavar"]
        if meta["action"] is not None:
            kwargs["action"] = meta["action"]
        else:
            hint = hints[f.name]
            args = [a for a in typing.get_args(hint) if a is not type(None)]
            kwargs["type"] = meta["parse"] or (args[0] if args else hint)
            if meta["choices"] is not None:
                kwargs["choices"] = meta["choices"]
        if f.default is dataclasses.MISSING:
            kwargs["required"] = True
        elif meta["action"] != "store_true":
            kwargs["default"] = f.default
        target.add_argument(meta["flag"], *meta["aliases"], **kwargs)


def options_of(args: argparse.Namespace, cls: type[T]) -> T:
    """The option type ``cls`` of parsed flags: each field from the flag of its name (a
    list as a tuple); a field the namespace lacks keeps its default."""
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if hasattr(args, f.name):
            value = getattr(args, f.name)
            values[f.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)
