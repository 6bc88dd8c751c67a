"""The drop-in settings (``NIGHTJAR_CONFIG``, ``--additional-config``) are typed: each
value is checked against its field, one line naming the key, before vLLM starts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nightjar.errors import NightjarInputError
from nightjar.live.settings import CONFIG_ENV, KEY, LiveSettings


def _settings(data: Any) -> LiveSettings:
    return LiveSettings.from_config({KEY: data})


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        ({"alias": "no"}, "alias must be True or False"),
        ({"switch_runs": "yes"}, "switch_runs must be True or False"),
        ({"gamma_max": 2.5}, "gamma_max must be an integer"),
        ({"gamma_max": True}, "gamma_max must be an integer"),
        ({"seed": "1"}, "seed must be an integer"),
        ({"memory": 3}, "memory must be a JSON object"),
        ({"memory": {"k_offload": "3"}}, "memory: k_offload must be an integer"),
        ({"memory": {"bogus": 1}}, "memory: unknown key 'bogus'"),
        ({"reload_cost_s": "fast"}, "reload_cost_s must be a number"),
        ({"reload_cost_s": float("nan")}, "must be a finite number"),
        ({"step_log": 7}, "step_log must be a string"),
        ({"forced_residency": [1]}, "forced_residency must be a JSON object"),
        ({"forced_residency": {"x": "offload"}}, "step 'x' is not an integer"),
        ({"forced_residency": {"3": 1}}, "action must be a string"),
        ({"policy": "bogus"}, "unknown policy 'bogus'"),
        ({"nope": 1}, "unknown key 'nope'"),
        ([1, 2], "must be a JSON object"),
    ],
)
def test_a_wrong_type_is_one_line_naming_the_key(data: Any, needle: str) -> None:
    with pytest.raises(NightjarInputError) as err:
        _settings(data)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_well_typed_settings_round_trip() -> None:
    settings = LiveSettings(policy="nightjar+", gamma_max=2, alias=False,
                            forced_residency={3: "offload", 9: "reload"}, reload_cost_s=0.5)
    assert LiveSettings.from_config(settings.to_additional_config()) == settings
    assert _settings({"policy": "fixed:2@offload=off", "gamma_max": 2}).gamma_max == 2
    assert _settings({"policy": "cycle:3,0/2"}).policy == "cycle:3,0/2"


@pytest.mark.parametrize("text", ["[1]", "3", '"x"', "true"])
def test_env_json_that_is_not_an_object_is_not_read_as_a_path(
    text: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CONFIG_ENV, text)
    with pytest.raises(NightjarInputError, match="must hold a JSON object"):
        LiveSettings.for_engine(None, 3)


def test_env_may_name_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "nj.json"
    path.write_text(json.dumps({"policy": "fixed:1"}))
    monkeypatch.setenv(CONFIG_ENV, str(path))
    assert LiveSettings.for_engine(None, 3).policy == "fixed:1"
    monkeypatch.setenv(CONFIG_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(NightjarInputError, match="cannot read"):
        LiveSettings.for_engine(None, 3)
