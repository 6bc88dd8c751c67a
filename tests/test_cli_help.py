"""Help text: every option's default is shown, no reStructuredText markup leaks; one
draft-KV default across the simulator, the live engine and every command."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from nightjar.cli import build_parser, plain
from nightjar.core.draft_kv import DEFAULT_DRAFT_KV


def parsers() -> dict[str, argparse.ArgumentParser]:
    out: dict[str, argparse.ArgumentParser] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        out[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, child in action.choices.items():
                    walk(child, f"{name} {sub}")

    walk(build_parser(), "nightjar")
    return out


@pytest.mark.parametrize("name", sorted(parsers()))
def test_help_has_no_rst_markup(name: str) -> None:
    text = parsers()[name].format_help()
    assert "``" not in text and ":mod:`" not in text and ":func:`" not in text


def test_help_shows_defaults() -> None:
    text = parsers()["nightjar sim"].format_help()
    assert "(default: 4, or the profile's longest" in " ".join(text.split())  # --gamma-max
    assert f"(default: {DEFAULT_DRAFT_KV})" in text
    live = parsers()["nightjar live"].format_help()
    assert "(default: 256)" in live and "(default: drain)" in live  # --max-num-seqs


def test_plain_strips_roles_and_literals() -> None:
    assert plain("see :mod:`nightjar.sim` and ``--out DIR``") == "see nightjar.sim and --out DIR"


def test_one_draft_kv_default_everywhere() -> None:
    from nightjar.live.settings import LiveSettings
    from nightjar.sim import SimConfig

    assert SimConfig().draft_kv_mode.value == DEFAULT_DRAFT_KV == LiveSettings().draft_kv
    parser = build_parser()
    validate = ["validate", "--live-run", "x", "--profile", "p"]
    commands = (["sim"], validate)
    for argv in commands:
        assert parser.parse_args(argv).draft_kv == DEFAULT_DRAFT_KV, argv
    # nightjar live picks it by the installed release (sync on vLLM 0.34, which cannot
    # skip the draft): its flag names the shared default in its help.
    assert parser.parse_args(["live", "--model", "m"]).draft_kv is None
    from nightjar.live.run_options import LiveOptions

    help_text = next(f.metadata["help"] for f in dataclasses.fields(LiveOptions)
                     if f.name == "draft_kv")
    assert f"default: {DEFAULT_DRAFT_KV}" in help_text
