"""Fixtures for the live-engine tests: tiny models built once per session, engines.

Every test here needs vLLM (the CPU build, see scripts/install-live.sh); without it
they are skipped with that reason. Engines run float32 in eager mode on CPU.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

HAVE_VLLM = importlib.util.find_spec("vllm") is not None
SKIP_REASON = "vllm is not installed (scripts/install-live.sh sets up the live venv)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.live)
            needs = getattr(getattr(item, "module", None), "NEEDS_VLLM", True)
            if needs and not HAVE_VLLM:
                item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


def _preload_iomp() -> None:
    # Engine processes inherit the environment; without Intel OpenMP preloaded the
    # CPU engine runs about 20x slower.
    if "libiomp5" in os.environ.get("LD_PRELOAD", ""):
        return
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return
    venv = Path(spec.origin).parents[4]
    found = next(iter(venv.rglob("libiomp5.so")), None)
    if found is not None:
        os.environ["LD_PRELOAD"] = str(found)


@pytest.fixture(scope="session")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The small agreeing/random/foreign-vocab models (fast enough for many runs)."""
    from nightjar.live.tiny import SMALL, build

    return build(tmp_path_factory.mktemp("tiny-small"), SMALL)


@pytest.fixture(scope="session")
def tiny_big(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The design guide's 8-layer, 1024-wide pair, for the speed trade-off test."""
    from nightjar.live.tiny import TinySpec, build

    return build(tmp_path_factory.mktemp("tiny-big"), TinySpec())


@pytest.fixture(scope="session")
def tiny_weak(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The big pair with a weaker draft: every gamma > 0 loses at B = 64 on a CPU."""
    from nightjar.live.tiny import WEAK, build

    return build(tmp_path_factory.mktemp("tiny-weak"), WEAK)


@pytest.fixture(scope="session")
def make_llm() -> Callable[..., Any]:
    """``with make_llm(EngineSpec(...)) as llm:`` starts an engine and shuts it down."""
    _preload_iomp()
    from nightjar.live.engine_spec import prepare_env

    prepare_env()
    # Every engine the tests start computes on all the cores this process may use
    # (nightjar.live.binding, applied by engine_kwargs), unless the user exported
    # VLLM_CPU_OMP_THREADS_BIND: vLLM's own "auto" would leave one of two cores idle.

    from nightjar.live.engine_spec import open_llm

    return open_llm


def greedy(llm: Any, prompts: list[list[int]], max_tokens: list[int]) -> list[list[int]]:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = [SamplingParams(temperature=0.0, max_tokens=m, ignore_eos=True) for m in max_tokens]
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


@pytest.fixture(scope="session")
def run_greedy() -> Callable[..., list[list[int]]]:
    return greedy
