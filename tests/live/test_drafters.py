"""Gamma per step with every drafter vLLM 0.32 runs on this CPU: EAGLE-3 and EAGLE heads,
the target's MTP layers, n-gram and suffix lookup (draft models: test_lossless.py).

For each method, with Nightjar's scheduler and worker and a policy that walks
gamma 3, 0, 2, 1 (K = 0 steps included, the drafter skipped on them): greedy output
equals vLLM without speculation token for token; no step drafts more than its K per
request, a K = 0 step drafts nothing, a model drafter drafts exactly K; and the step
log holds the policy's choices in order, each verified one step later. The heads are
tiny random-weight checkpoints in the format vLLM loads (nightjar.live.tiny_heads);
prompts repeat a short pattern, so the lookups find matches and accept.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import random
from pathlib import Path
from typing import Any

import pytest

from nightjar.live.engine_spec import EngineSpec
from nightjar.live.settings import LiveSettings
from nightjar.live.steplog import read_log

N_REQUESTS = 12
POLICY = "cycle:3,0,2,1/2"
CYCLE = [3, 3, 0, 0, 2, 2, 1, 1]
BASE: dict[str, Any] = dict(max_model_len=384, max_num_seqs=8, kv_cache_bytes=32 << 20)
HAVE_ARCTIC = importlib.util.find_spec("arctic_inference") is not None


def _workload() -> tuple[list[list[int]], list[int]]:
    """Prompts that repeat a short random pattern (n-gram and suffix lookups match)."""
    rng = random.Random(11)
    prompts = []
    for _ in range(N_REQUESTS):
        pattern = [rng.randrange(3, 2000) for _ in range(rng.randrange(2, 6))]
        prompts.append((pattern * 40)[: rng.randrange(12, 60)])
    return prompts, [rng.randrange(8, 40) for _ in range(N_REQUESTS)]


@pytest.fixture(scope="session")
def heads(tiny: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from nightjar.live.tiny_heads import build_eagle, build_eagle3, build_mtp_target

    root = tmp_path_factory.mktemp("heads")
    return {
        "eagle3": build_eagle3(tiny.target, root / "eagle3"),
        "eagle": build_eagle(tiny.target, root / "eagle"),
        "mimo": build_mtp_target(root / "mimo"),
    }


@pytest.fixture(scope="session")
def references(tiny: Any, heads: dict[str, Path], make_llm: Any, run_greedy: Any) -> Any:
    """Greedy outputs without speculation, per target (computed once, on demand)."""
    cache: dict[str, list[list[int]]] = {}

    def get(target: str) -> list[list[int]]:
        if target not in cache:
            prompts, max_tokens = _workload()
            spec = EngineSpec(target, None, LiveSettings(gamma_max=0), **BASE)
            with make_llm(spec) as llm:
                cache[target] = run_greedy(llm, prompts, max_tokens)
        return cache[target]

    return get


# method -> (target key, checkpoint key or None, speculative options, model drafter)
METHODS: dict[str, tuple[str, str | None, dict[str, Any], bool]] = {
    "ngram": ("tiny", None, {"prompt_lookup_max": 3, "prompt_lookup_min": 1}, False),
    "suffix": ("tiny", None, {}, False),
    "eagle3": ("tiny", "eagle3", {}, True),
    "eagle": ("tiny", "eagle", {}, True),
    "mtp": ("mimo", None, {}, True),
}


@pytest.mark.parametrize("method", sorted(METHODS))
def test_every_drafter_is_lossless_with_gamma_per_step(
    method: str, tiny: Any, heads: dict[str, Path], references: Any, make_llm: Any,
    run_greedy: Any, tmp_path: Path,
) -> None:
    if method == "suffix" and not HAVE_ARCTIC:
        pytest.skip("suffix decoding needs arctic-inference (pip install arctic-inference)")
    target_key, model_key, options, model_drafter = METHODS[method]
    target = str(tiny.target) if target_key == "tiny" else str(heads[target_key])
    draft = str(heads[model_key]) if model_key else None
    prompts, max_tokens = _workload()
    log = tmp_path / "steps.jsonl"
    settings = LiveSettings(policy=POLICY, gamma_max=3, step_log=str(log), draft_kv="skip")
    spec = EngineSpec(target, draft, settings, method=method, spec_options=options, **BASE)
    with make_llm(spec) as llm:
        got = run_greedy(llm, prompts, max_tokens)
        counts = llm.collective_rpc("nightjar_draft_counts")[0]

    reference = references(target)
    assert [len(o) for o in got] == max_tokens
    mismatched = [i for i, (a, b) in enumerate(zip(reference, got, strict=True)) if a != b]
    assert not mismatched, f"{method}: outputs differ for requests {mismatched}"

    contents = read_log(log)
    start = next(e for e in contents.events if e["event"] == "start")
    assert start["engine"]["method"] == method
    # The policy's choices, in order, are the cycle (it is asked on every step that
    # has a batch to price); each is verified one step later.
    chosen = contents.chosen_gamma
    assert chosen == _expected_choices(log)
    assert [s.gamma for s in contents.steps[1:]] == chosen[:-1]
    decode = [s for s in contents.steps if s.batch_size > 0]
    assert {s.gamma for s in decode} == {0, 1, 2, 3}
    assert sum(1 for a, b in itertools.pairwise(decode) if a.gamma != b.gamma) >= 6
    # Per-step K honoured: never more than K per request, nothing at K = 0.
    assert all(s.drafted <= s.gamma * s.batch_size for s in decode)
    assert all(s.drafted == 0 for s in decode if s.gamma == 0)
    spec_steps = [s for s in decode if s.gamma > 0]
    if model_drafter:
        # A model drafter proposes exactly K for every decoding request.
        full = [s for s in spec_steps if s.drafted == s.gamma * s.batch_size]
        assert len(full) >= 0.8 * len(spec_steps)
        assert counts["skips"] > 0 and counts["runs"] > 0  # skipped at K = 0
    else:
        # A lookup proposes up to K where it finds a match: on these prompts it does.
        assert sum(s.accepted for s in decode) > 0
    assert sum(s.drafted for s in decode) > 0


def _expected_choices(log: Path) -> list[int]:
    """The cycle, advanced on each step the policy was asked (a priced batch >= 1)."""
    out, asked = [], 0
    for line in log.read_text().splitlines():
        row = json.loads(line)
        if row["kind"] != "step":
            continue
        if row["priced_batch"] > 0:
            out.append(CYCLE[asked % len(CYCLE)])
            asked += 1
        else:
            out.append(0)
    return out


def test_an_eagle3_head_moves_out_and_back_without_the_targets_weights(
    tiny: Any, heads: dict[str, Path], references: Any, make_llm: Any, run_greedy: Any,
    tmp_path: Path,
) -> None:
    """Elastic memory with an EAGLE-3 head: the head shares the target's embedding, which
    must stay put when the head is parked; output stays lossless across two cycles."""
    prompts, max_tokens = _workload()
    log = tmp_path / "steps.jsonl"
    settings = LiveSettings(
        policy="fixed:2", gamma_max=3, step_log=str(log), draft_kv="skip",
        forced_residency={6: "offload", 14: "reload", 22: "offload", 30: "reload"},
    )
    spec = EngineSpec(str(tiny.target), str(heads["eagle3"]), settings, method="eagle3", **BASE)
    with make_llm(spec) as llm:
        got = run_greedy(llm, prompts, max_tokens)
        counts = llm.collective_rpc("nightjar_draft_counts")[0]
    assert got == references(str(tiny.target))
    events = [e["event"] for e in read_log(log).events if e["event"].endswith("_done")]
    assert events == ["offload_done", "reload_done", "offload_done", "reload_done"]
    assert counts["skips"] > 0 and counts["failed"] == 0
