"""The version seam, without vLLM: which family a version is, how each reads a step's
output, and that an output it cannot read is never counted as zero acceptance."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import pytest

from nightjar.core.drafter import DRAFTERS
from nightjar.core.memory import MemoryConfig
from nightjar.core.types import StepContext
from nightjar.errors import NightjarInputError
from nightjar.live.family_checks import family_refusal
from nightjar.live.plugins.stepstats import StepStats
from nightjar.live.settings import LiveSettings
from nightjar.live.vllm_family import SUPPORTED_VLLM, VllmMismatch, declared_arms, family_of


def test_each_supported_release_has_one_family() -> None:
    assert SUPPORTED_VLLM == ("0.32.0", "0.33.0", "0.34.0")
    assert family_of("0.32.0+cpu").runner == "V1"
    assert family_of("0.33.0").runner == "V1"
    assert family_of("0.34.0").runner == "V2"


@pytest.mark.parametrize("version", ["0.31.2", "0.35.0", "0.34.0rc1", "1.0.0"])
def test_an_unknown_release_is_refused_in_one_line(version: str) -> None:
    with pytest.raises(NightjarInputError) as err:
        family_of(version)
    message = str(err.value)
    assert "\n" not in message and version in message and "0.32.0, 0.33.0, 0.34.0" in message


def test_v1_reads_by_index_and_v2_by_position() -> None:
    v1 = SimpleNamespace(req_ids=["b", "a"], req_id_to_index={"a": 1, "b": 0},
                         sampled_token_ids=[[7], [1, 2, 3]])
    assert family_of("0.32.0").sampled_by_request(v1) == {"a": [1, 2, 3], "b": [7]}
    v2 = SimpleNamespace(req_ids=["b", "a"], sampled_token_ids=[[7], [1, 2, 3]])
    assert family_of("0.34.0").sampled_by_request(v2) == {"a": [1, 2, 3], "b": [7]}


def test_a_missing_output_field_is_an_error_naming_it() -> None:
    # 0.34's output has no req_id_to_index: read as 0.32's, it must fail, not read {}.
    v2_output = SimpleNamespace(req_ids=["a"], sampled_token_ids=[[1, 2]])
    with pytest.raises(VllmMismatch, match="req_id_to_index"):
        family_of("0.33.0").sampled_by_request(v2_output)


def _ctx() -> StepContext:
    return StepContext(now=0.0, batch_size=2, num_waiting=0, kv_free_blocks=10,
                       kv_total_blocks=10, draft_resident=True, gamma_max=3)


def _scheduled(k: int) -> SimpleNamespace:
    return SimpleNamespace(num_scheduled_tokens={"a": 1 + k, "b": 1 + k},
                           scheduled_spec_decode_tokens={"a": [0] * k, "b": [0] * k})


def test_zero_acceptance_is_told_apart_from_unread_counts() -> None:
    stats = StepStats()
    for sampled in ({"a": [5], "b": [6]}, {"a": [5]}):
        stats.begin(None, _ctx(), chosen=2, gamma=2, clamped=False, state="resident")
        result = stats.end(_scheduled(2), sampled, 1)
        assert result is not None
        record = result[0]
        if "b" in sampled:  # both read: every draft rejected, a real zero
            assert (record.drafted, record.accepted, stats.last_unread) == (4, 0, 0)
        else:  # b's tokens were not in the output: its drafts are not counted
            assert (record.drafted, record.accepted, stats.last_unread) == (2, 0, 1)


def test_the_v2_family_refuses_what_its_runner_cannot_do() -> None:
    v1, v2 = family_of("0.32.0"), family_of("0.34.0")
    model = DRAFTERS["draft_model"]
    sync = LiveSettings(policy="nightjar", gamma_max=3, draft_kv="sync")
    assert family_refusal(v1, sync, model) is None
    assert family_refusal(v2, sync, model) is None
    skip = LiveSettings(policy="nightjar", gamma_max=3, draft_kv="skip")
    assert family_refusal(v1, skip, model) is None
    assert "--draft-kv sync" in (family_refusal(v2, skip, model) or "")
    # A lookup drafter has no KV to keep: skip is moot there.
    assert family_refusal(v2, skip, DRAFTERS["ngram"]) is None
    offload = LiveSettings(policy="nightjar", gamma_max=3, draft_kv="sync",
                           memory=MemoryConfig())
    why = family_refusal(v2, offload, model) or ""
    assert "not yet supported on vLLM 0.34.0" in why and "\n" not in why


@pytest.mark.parametrize(("gamma_max", "max_num_seqs"), [(3, 256), (4, 64), (1, 8), (3, 4),
                                                         (7, 1024)])
def test_the_declared_table_names_every_arm_over_every_batch(
    gamma_max: int, max_num_seqs: int
) -> None:
    table = declared_arms(gamma_max, max_num_seqs)
    # vLLM's rules: ranges from 1, contiguous, non-overlapping, up to max_num_seqs.
    assert table[0][0] == 1 and table[-1][1] == max_num_seqs
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(table))
    assert all(start <= end for start, end, _ in table)
    assert [k for _, _, k in table] == list(range(gamma_max, -1, -1))
