"""``nightjar live`` and ``nightjar bench live`` take their flags from their option
types (nightjar/live/run_options.py, nightjar/live/bench/bench_options.py), as
``nightjar sim`` takes its flags from RunConfig: one field, one flag."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from nightjar.cli import build_parser, parse
from nightjar.commands.run_flags import options_of
from nightjar.core.memory import MemoryConfig
from nightjar.errors import NightjarInputError
from nightjar.live.bench.bench_options import BenchOptions
from nightjar.live.elastic import THRESHOLDS
from nightjar.live.run_options import LiveOptions


def _sub(*names: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = build_parser()
    for name in names:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


@pytest.mark.parametrize(("cls", "command"), [(LiveOptions, ("live",)),
                                               (BenchOptions, ("bench", "live"))])
def test_every_field_is_one_flag_with_its_default(cls: type, command: tuple[str, ...]) -> None:
    actions = {a.dest: a for a in _sub(*command)._actions if a.option_strings}
    flagged = [f for f in dataclasses.fields(cls) if f.metadata["flag"]]
    assert {f.name for f in flagged} <= set(actions)
    for f in flagged:
        action = actions[f.name]
        assert action.option_strings[0] == f.metadata["flag"]
        if f.default is dataclasses.MISSING:
            assert action.required, f.name
        else:
            assert action.default == f.default, f.name
    own = {d for d in actions if d not in ("help",)}
    assert own == {f.name for f in flagged}  # no flag without its field


def test_parsed_flags_make_the_options_the_live_run_is_handed() -> None:
    args = parse(build_parser(), ["live", "--model", "m", "--policy", "nospec", "--policy",
                                  "fixed:2", "-tp", "2", "--out", "o", "--k-offload", "3",
                                  "--dtype", "float32", "--", "--api-key", "k"])
    options = options_of(args, LiveOptions)
    assert options.model == "m" and options.policies == ("nospec", "fixed:2")
    assert options.tensor_parallel_size == 2 and options.out == Path("o")
    assert options.vllm_flags == ("--dtype", "float32")
    assert options.server_args == ("--api-key", "k")
    assert options.thresholds()["k_offload"] == 3
    assert LiveOptions(model="m", offload="on", k_offload=3).memory() == MemoryConfig(k_offload=3)
    bench = options_of(parse(build_parser(), ["bench", "live", "--model", "m", "--trace", "t"]),
                       BenchOptions)
    assert bench == BenchOptions(model="m", traces=("t",))


def test_the_memory_thresholds_are_the_controller_s_fields() -> None:
    memory = {f.name for f in dataclasses.fields(MemoryConfig)}
    live = {f.name for f in dataclasses.fields(LiveOptions)}
    assert set(THRESHOLDS) <= memory & live


def test_the_flags_both_commands_have_are_spelled_and_typed_alike() -> None:
    live = {f.name: f for f in dataclasses.fields(LiveOptions)}
    bench = {f.name: f for f in dataclasses.fields(BenchOptions)}
    for name in live.keys() & bench.keys():
        assert live[name].metadata["flag"] == bench[name].metadata["flag"], name
    for name in ("max_requests", "out", "force", "quiet", "slo_ttft", "slo_tpot"):
        assert live[name].metadata["help"] == bench[name].metadata["help"], name
        assert live[name].default == bench[name].default, name


def test_bench_options_check_their_numbers() -> None:
    BenchOptions(model="m", traces=("t",)).check()
    with pytest.raises(NightjarInputError, match="--retries must be >= 0"):
        BenchOptions(model="m", traces=("t",), retries=-1).check()
