"""Issue 24: the JSON Schemas nightjar publishes for editors (nightjar/schemas).

The shipped files are the generated ones; every bundled trace and profile is valid under
them; and (property) every document nightjar's loaders accept is valid under its schema,
so an editor never flags a file nightjar reads.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nightjar.errors import NightjarInputError
from nightjar.profile.profile import Profile, bundled_profiles
from nightjar.schemas import profile_schema, render, schema_text, trace_schema
from nightjar.trace.schema import parse_trace_json
from nightjar.trace.trace import bundled_traces, materialize
from tests.test_fuzz import BASE_PROFILE, FIELDS, JSON, ODD, TRACE_DOC, _has

TRACE = jsonschema.Draft202012Validator(trace_schema())
PROFILE = jsonschema.Draft202012Validator(profile_schema())
FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@pytest.mark.parametrize("kind", ["trace", "profile"])
def test_the_shipped_schema_is_the_generated_one(kind: str) -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(schema_text(kind)))
    assert schema_text(kind) == render(kind), "regenerate: python -c 'from nightjar.schemas ...'"


def test_every_bundled_file_is_valid_under_its_schema() -> None:
    for name in bundled_traces():
        bundled = resources.files("nightjar.trace.bundled")
        doc = json.loads(bundled.joinpath(f"{name}.json").read_text())
        TRACE.validate(doc)
    for name in bundled_profiles():
        path = name.replace("/", "__", 1) + ".json"
        PROFILE.validate(json.loads(resources.files("nightjar.profile.bundled").joinpath(path)
                                    .read_text()))


def test_the_cli_prints_the_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    from nightjar.cli import main

    assert main(["trace", "schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "nightjar trace"
    assert main(["profile", "--schema"]) == 0
    assert json.loads(capsys.readouterr().out)["title"] == "nightjar profile"


@FUZZ
@given(TRACE_DOC)
def test_a_trace_nightjar_reads_is_valid_under_the_schema(doc: Any) -> None:
    try:
        materialize(parse_trace_json(doc, "fuzz.json", "fuzz"))
    except NightjarInputError:
        return
    TRACE.validate(doc)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(FIELDS), st.one_of(ODD, JSON)), max_size=3))
def test_a_profile_nightjar_reads_is_valid_under_the_schema(edits: list[Any]) -> None:
    data = json.loads(json.dumps(BASE_PROFILE))
    for path, value in edits:
        target: Any = data
        for key in path[:-1]:
            target = target[key] if _has(target, key) else None
        if isinstance(target, dict) or _has(target, path[-1]):
            target[path[-1]] = value
    try:
        Profile.from_json(data, "fuzz.json")
    except NightjarInputError:
        return
    PROFILE.validate(data)


@pytest.mark.parametrize("drafter", ["eagle", "eagle3", "ngram", "suffix"])
def test_a_profile_of_every_drafter_kind_is_valid_under_the_schema(drafter: str) -> None:
    # Issue 23's ``drafter`` key: nightjar reads it, so the schema must allow it.
    from nightjar.roofline.costs import build_profile

    data = build_profile("h100-80gb", "llama-3.1-8b", None, "test", drafter=drafter)
    assert Profile.from_json(data, "roofline.json").drafter == drafter
    PROFILE.validate(data)
    with pytest.raises(jsonschema.ValidationError):
        PROFILE.validate({**data, "drafter": "medusa"})
