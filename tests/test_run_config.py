"""One run configuration reaches every entry point with one set of defaults.

Each field of :class:`nightjar.run.config.RunConfig` must be a flag of ``nightjar sim``, a
parameter of ``nightjar.simulate`` and a key of the sweep grid, all with the field's
default; ``nightjar validate`` exposes the fields that describe a live run. A setting
added to RunConfig and forgotten anywhere fails here.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
from typing import Any

import pytest

import nightjar.api
from nightjar.cli import build_parser
from nightjar.errors import NightjarInputError
from nightjar.run.config import (
    LIVE_GAMMA_MAX,
    LIVE_MAX_NUM_BATCHED_TOKENS,
    LIVE_MAX_NUM_SEQS,
    RunConfig,
    flag_of,
)
from nightjar.sweep.spec import AXES, SCALARS

FIELDS = {f.name: f.default for f in dataclasses.fields(RunConfig)}
# Where an entry point spells a field another way, or cannot hold it (and why).
SWEEP_NAME = {"policies": "policy", "seed": "seeds"}
SWEEP_LACKS = {"oracle", "alternatives"}  # a sweep cell runs one policy: the grid holds them
API_NAME = {"policies": "policies"}


def _actions(command: str) -> dict[str, argparse.Action]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices[command]
    return {a.dest: a for a in parser._actions}


def _cli_default(action: argparse.Action) -> Any:
    if action.dest == "policies":
        return None  # append: absent means the field's default set
    if action.dest == "gamma_max" and action.default is None:
        # Not given: the field's default, or the profile's longest gamma where its
        # table stops before (tests/test_sim_gamma_default.py).
        return FIELDS["gamma_max"]
    return action.default


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_every_setting_is_a_sim_flag_with_the_same_default(name: str) -> None:
    actions = _actions("sim")
    assert name in actions, f"nightjar sim has no flag for {name}"
    assert flag_of(name) in actions[name].option_strings
    want = None if name == "policies" else FIELDS[name]
    assert _cli_default(actions[name]) == want


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_every_setting_is_an_api_parameter_with_the_same_default(name: str) -> None:
    params = inspect.signature(nightjar.api.simulate).parameters
    param = params[API_NAME.get(name, name)]
    # None: the default set of policies; gamma_max not given (the field's default, or
    # the profile's longest where its table stops before, as nightjar sim).
    want = None if name in ("policies", "gamma_max") else FIELDS[name]
    assert param.default == want


@pytest.mark.parametrize("name", sorted(set(FIELDS) - SWEEP_LACKS))
def test_every_setting_is_a_sweep_key_with_the_same_default(name: str) -> None:
    key = SWEEP_NAME.get(name, name)
    if key in SCALARS:
        assert SCALARS[key] == FIELDS[name]
        return
    assert key in AXES, f"the sweep grid has no key for {name}"
    default = AXES[key][1]
    if name == "seed":
        assert default == (FIELDS[name],)
    elif name == "policies":
        assert default == FIELDS[name]
    else:
        assert default == (FIELDS[name],)


def test_validate_describes_the_live_run_with_the_live_defaults() -> None:
    actions = _actions("validate")
    live = _actions("live")
    given = {n for n in FIELDS if n in actions}
    assert given == {"seed", "gamma_max", "draft_kv", "engine", "max_num_seqs",
                     "max_num_batched_tokens"}
    # nightjar live's --gamma-max defaults to the engine's num_speculative_tokens when
    # one is given, else to the shared default, which validate assumes.
    assert live["gamma_max"].default is None
    assert f"else {LIVE_GAMMA_MAX})" in (live["gamma_max"].help or "")
    assert actions["gamma_max"].default == LIVE_GAMMA_MAX
    assert actions["max_num_seqs"].default == LIVE_MAX_NUM_SEQS == live["max_num_seqs"].default
    assert (actions["max_num_batched_tokens"].default == LIVE_MAX_NUM_BATCHED_TOKENS
            == live["max_num_batched_tokens"].default)
    # nightjar live's --draft-kv follows the installed release (skip on the V1 runner, sync
    # on 0.34); validate replays a V1 run, so it assumes the V1 default.
    assert live["draft_kv"].default is None
    assert f"default: {FIELDS['draft_kv']};" in (live["draft_kv"].help or "")
    assert actions["draft_kv"].default == FIELDS["draft_kv"]


def test_sim_and_live_share_the_defaults_of_the_settings_both_have() -> None:
    live = _actions("live")
    for name in ("max_num_seqs", "max_num_batched_tokens"):
        assert live[name].default == FIELDS[name]
    assert FIELDS["gamma_max"] == LIVE_GAMMA_MAX


def test_sweep_cells_and_the_api_build_the_same_simulator_config() -> None:
    from nightjar.sweep.spec import build_spec

    cell = build_spec({"policy": ["fixed:2"], "engine": ["v0"], "max_model_len": [4096],
                       "prior": ["scale:1.3"]}).cells()[0]
    config = cell.run_config()
    assert config.sim_config("draft_model") == RunConfig(
        policies=("fixed:2",), engine="v0", max_model_len=4096, prior="scale:1.3",
        oracle=False,
    ).sim_config("draft_model")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"offload": "maybe"}, "offload 'maybe': choose from auto, on, off"),
        ({"oracle": "no"}, "oracle must be True or False"),
        ({"gamma_max": 0}, "gamma_max must be >= 1"),
        ({"engine": "v2"}, "engine 'v2': choose from v1, v0"),
        ({"reload": "migrate", "offload": "off"}, "reload migrate needs offload on"),
        ({"policies": "nospec"}, "policies must be policy specs"),
        ({"max_model_len": 0}, "max_model_len must be >= 1"),
        ({"slo_ttft": -1.0}, "slo_ttft must be > 0"),
        ({"warp": 1}, "unknown setting 'warp'"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(values: dict[str, Any], message: str) -> None:
    with pytest.raises(NightjarInputError) as info:
        RunConfig.build(values)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_the_command_line_names_the_flag() -> None:
    with pytest.raises(NightjarInputError, match="--gamma-max must be >= 1"):
        RunConfig.build({"gamma_max": 0}, spell=flag_of)
