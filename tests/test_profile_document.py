"""The profile document module (nightjar.profile.document): the one writer of the format.

Its rows are the format's columns, its file is what the loader reads back unchanged,
and its layout (which keys, in which order) is the one both writers have always
written. The writers' own files are frozen elsewhere: the roofline's by the bundled
profiles (tests/test_roofline.py), the measured profiler's in tests/golden/
(tests/test_profiler_assemble.py).
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from nightjar.profile import format as fmt
from nightjar.profile.document import (
    DecodeRow,
    DraftForwardRow,
    MixedRow,
    PrefillRow,
    ProfileDocument,
    WakeRow,
    to_ms,
    with_mixed,
)
from nightjar.profile.profile import DEFAULT_PROFILE, Profile, load_profile
from nightjar.roofline.costs import build_profile

HEAD = ["format_version", "name", "source", "command", "notes", "gpu", "target", "draft",
        "hardware"]
TABLES = ["memory", "decode", "draft_forward", "prefill"]


def test_each_row_is_the_formats_columns() -> None:
    assert DecodeRow._fields == fmt.DECODE_COLUMNS
    assert DraftForwardRow._fields == fmt.DRAFT_FORWARD_COLUMNS
    assert PrefillRow._fields == fmt.PREFILL_COLUMNS
    assert MixedRow._fields == fmt.MIXED_COLUMNS
    assert WakeRow._fields == fmt.WAKE_COLUMNS


def test_seconds_become_milliseconds_rounded_in_one_place() -> None:
    assert to_ms(0.0123456789) == 12.34568
    assert to_ms(0.0) == 0.0
    row = DecodeRow.from_seconds(8, 2, 128, 0.02, 0.005, 0.0149999)
    assert row == (8, 2, 128, 20.0, 5.0, 14.9999)
    assert DraftForwardRow.from_seconds(8, 128, 0.0025) == (8, 128, 2.5)
    assert PrefillRow.from_seconds(64, 0.1, 0.01) == (64, 100.0, 10.0)


def _document(**changes: object) -> ProfileDocument:
    grid = [(b, g, c) for b in (1, 4) for g in (0, 1) for c in (0, 128)]
    doc = ProfileDocument(
        name="gpu/t+d", source="calibrated-roofline", command="nightjar profile --roofline",
        gpu="gpu", target="t", draft="d",
        memory=replace(load_profile(DEFAULT_PROFILE).memory, max_model_len=None),
        decode=[DecodeRow.from_seconds(b, g, c, 0.01 * (1 + g) + 1e-5 * b, 0.004 * g,
                                       0.006 + 1e-5 * b) for b, g, c in grid],
        draft_forward=[DraftForwardRow.from_seconds(b, c, 0.001) for b in (1, 4)
                       for c in (0, 128)],
        prefill=[PrefillRow.from_seconds(n, 1e-4 * n, 1e-5 * n) for n in (16, 256)],
        acceptance={"sharegpt": (0.6, 8.0)},
        notes="a test", hardware={"description": "none"}, roofline={"op_fit": "a100"},
    )
    return replace(doc, **changes)  # type: ignore[arg-type]


def test_the_loader_reads_back_exactly_what_the_document_wrote() -> None:
    data = _document().to_json()
    loaded = Profile.from_json(json.loads(json.dumps(data)), "doc")
    assert loaded.to_json() == data
    assert loaded.gammas == (0, 1) and loaded.acceptance("sharegpt") == (0.6, 8.0)
    assert data["decode"][0] == [1, 0, 0, 10.01, 0.0, 6.01]  # plain lists, ints kept


def test_the_layout_is_the_one_both_writers_have_always_written() -> None:
    model = _document().to_json()
    assert list(model) == [*HEAD, "roofline", *TABLES, "acceptance"]
    assert list(_document(drafter="eagle3").to_json()) == [*list(model), "drafter"]
    measured = _document(source="measured", roofline=None, measured={"repeats": 1},
                         mixed=[MixedRow(1, 64, 3.5)], wake=[WakeRow(0.5, 12.0)])
    plain = [*HEAD, "measured", *TABLES, "mixed", "wake", "acceptance"]
    assert list(measured.to_json()) == plain
    assert list(replace(measured, drafter="ngram").to_json()) == ["drafter", *plain]
    bare = _document(notes=None, hardware=None, roofline=None, acceptance={}).to_json()
    assert list(bare) == [h for h in HEAD if h not in ("notes", "hardware")] + [
        *TABLES, "acceptance"]
    assert bare["acceptance"] == {} and bare["format_version"] == fmt.FORMAT_VERSION


def test_memory_pins_are_written_only_where_set() -> None:
    doc = _document()
    assert not {"kv_blocks_with_draft", "max_model_len"} & set(doc.to_json()["memory"])
    pinned = replace(doc, memory=replace(doc.memory, kv_blocks_with_draft=7, max_model_len=512))
    mem = pinned.to_json()["memory"]
    assert list(mem)[-2:] == ["kv_blocks_with_draft", "max_model_len"]
    assert Profile.from_json(pinned.to_json(), "pinned").memory.kv_blocks(True) == 7


def test_metadata_is_the_callers_to_extend_without_touching_the_document() -> None:
    doc = _document(source="measured", roofline=None, measured={"repeats": 1})
    data = doc.to_json()
    data["measured"]["seconds"] = 12.5
    assert doc.measured == {"repeats": 1}


def test_a_mixed_table_added_later_keeps_the_base_layout() -> None:
    base = _document().to_json()
    out = with_mixed(base, [MixedRow(1, 64, 2.0)], "later")
    assert list(out) == [*list(base), "mixed"] and out["notes"] == "later"
    again = with_mixed(out, [MixedRow(4, 64, 3.0)], "again")
    assert list(again) == list(out) and again["mixed"] == [[4, 64, 3.0]]
    assert "mixed" not in base


@pytest.mark.parametrize("drafter", ["draft_model", "eagle3", "ngram"])
def test_the_roofline_writes_the_layout(drafter: str) -> None:
    draft = "llama-3.2-1b" if drafter == "draft_model" else None
    data = build_profile("h100-80gb", "llama-3.1-8b", draft, "c", drafter=drafter)
    keys = [*HEAD, "roofline", *TABLES, "acceptance"]
    assert list(data) == (keys if drafter == "draft_model" else [*keys, "drafter"])
