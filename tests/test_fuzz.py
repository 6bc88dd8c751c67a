"""Issue #13 problem 4: property-based tests of every parser and of the CLI.

For any generated input a parser returns a valid object or raises
NightjarInputError with a one-line message; the CLI exits 0 or 2 and never lets an
exception out. Bounded: a fixed number of examples each, no deadline, ~1 minute in all.
"""

import contextlib
import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nightjar.cli import main
from nightjar.core.policy import Policy, PolicyEnv
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import make_policy, registered
from nightjar.profile.profile import Profile, load_profile
from nightjar.sim import SimConfig, simulate
from nightjar.trace.importers import import_azure_csv, import_sharegpt
from nightjar.trace.schema import parse_trace_json
from nightjar.trace.trace import Trace, materialize
from tests.hang import fails_after

A100 = "a100-80gb/vicuna-13b+vicuna-68m"
FUZZ = settings(max_examples=300, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

# Values that break parsers: wrong types, non-finite and huge numbers, odd text.
ODD = st.sampled_from([
    0, 1, 2, -1, 3.5, -0.0, 1e-300, 1e300, 2**63, 2**70, -(2**70), math.nan, math.inf,
    -math.inf, "", "x", "1", "²", "\n", "../..", None, True, False, [], {}, [1], {"a": 1},
])
# The values most parsers get wrong: beyond int64, negative, zero, NaN.
EDGE = [2**63, 2**70, -1, 0, math.nan, math.inf]
SCALARS = st.one_of(ODD, st.integers(), st.floats(allow_nan=True), st.text(max_size=12),
                    st.booleans(), st.none())
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)),
    max_leaves=12)


def one_line_error(exc: NightjarInputError) -> None:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text and len(text) <= 2000


# -- traces ---------------------------------------------------------------------------

REQ_KEYS = ["arrival_s", "prompt_tokens", "output_tokens", "prompt", "prompt_token_ids",
            "workload", "acceptance", "arival_s"]
SEG_KEYS = ["duration_s", "rate_rps", "burstiness", "workload", "prompt_tokens",
            "output_tokens", "acceptance"]
# Small, mostly sane numbers so that valid generative traces stay small.
SEG_VALUES = st.one_of(ODD, st.sampled_from([0.5, 1, 2, 3, 10]),
                       st.fixed_dictionaries({"dist": st.sampled_from(
                           ["uniform", "lognormal", "constant", "x"])},
                           optional={"min": ODD, "max": ODD, "mean": ODD, "sigma": ODD,
                                     "value": ODD}))


def near(*good: Any) -> st.SearchStrategy[Any]:
    """Mostly a valid value, often an odd one: deep bugs hide behind valid neighbours."""
    return st.one_of(st.sampled_from(good), ODD, st.sampled_from(EDGE))


def requests() -> st.SearchStrategy[Any]:
    loose = st.dictionaries(st.sampled_from(REQ_KEYS), st.one_of(SCALARS, JSON), max_size=6)
    near_valid = st.fixed_dictionaries(
        {"arrival_s": near(0, 0.5, 2.0), "prompt_tokens": near(1, 10, 300),
         "output_tokens": near(1, 5, 50)},
        optional={"workload": near("sharegpt", "alpaca"), "acceptance": near(0.0, 0.5),
                  "prompt_token_ids": st.lists(near(0, 5, 31999), max_size=3),
                  "prompt": near("hi", "")},
    )
    return st.lists(st.one_of(near_valid, near_valid, loose, JSON), max_size=4)


def segments() -> st.SearchStrategy[Any]:
    return st.lists(st.dictionaries(st.sampled_from(SEG_KEYS), SEG_VALUES, max_size=7),
                    max_size=3)


TRACE_DOC = st.one_of(
    JSON,
    st.fixed_dictionaries({"requests": requests()}, optional={
        "seed": SCALARS, "name": SCALARS, "duration_s": SCALARS, "format_version": SCALARS,
        "workload": st.sampled_from(["sharegpt", "alpaca", "nope", 3])}),
    st.fixed_dictionaries({"segments": segments()}, optional={
        "seed": SCALARS, "name": SCALARS, "description": SCALARS}),
)


def check_trace(trace: Trace) -> None:
    assert len(trace) >= 1
    assert np.all(np.isfinite(trace.arrival_s)) and np.all(np.diff(trace.arrival_s) >= 0)
    assert trace.prompt_tokens.min() >= 1 and trace.output_tokens.min() >= 1


@FUZZ
@given(TRACE_DOC)
def test_trace_parser_gives_a_trace_or_one_line(doc: Any) -> None:
    try:
        trace = materialize(parse_trace_json(doc, "fuzz.json", "fuzz"))
    except NightjarInputError as exc:
        one_line_error(exc)
        return
    check_trace(trace)


# -- profiles -------------------------------------------------------------------------

BASE_PROFILE = load_profile(A100).to_json()
FIELDS = [("memory", k) for k in BASE_PROFILE["memory"]] + [
    (k,) for k in BASE_PROFILE if k not in ("decode", "draft_forward", "prefill")
] + [("decode", 0, 0), ("decode", 5, 2), ("decode", 7, 3), ("draft_forward", 0, 1),
     ("prefill", 0, 0), ("prefill", 1, 1), ("acceptance", "sharegpt", "mean"),
     ("acceptance", "sharegpt", "concentration"), ("typo",), ("memory", "typo")]


def _has(node: Any, key: Any) -> bool:
    if isinstance(node, dict):
        return key in node
    return isinstance(node, list) and isinstance(key, int) and key < len(node)


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(FIELDS), st.one_of(ODD, JSON)), max_size=3))
def test_profile_parser_gives_a_profile_or_one_line(edits: list[tuple[Any, Any]]) -> None:
    data = json.loads(json.dumps(BASE_PROFILE))
    for path, value in edits:
        # An earlier edit may have replaced a parent: only edit where the path still leads.
        target: Any = data
        for key in path[:-1]:
            target = target[key] if _has(target, key) else None
        if isinstance(target, dict) or _has(target, path[-1]):
            target[path[-1]] = value
    try:
        p = Profile.from_json(data, "fuzz.json")
    except NightjarInputError as exc:
        one_line_error(exc)
        return
    assert p.memory.kv_blocks(True) >= 1
    assert p.step_time_s(1, 0, p.min_context_len) >= 0
    # A profile that loads must also run: refused requests are one line too.
    trace = Trace(
        name="f", seed=0, arrival_s=np.array([0.0, 0.1]), prompt_tokens=np.array([40, 3000]),
        output_tokens=np.array([6, 4]), workload=np.array(["sharegpt"] * 2, dtype=object),
        acceptance=np.full(2, np.nan),
    )
    for offload in (False, True):
        try:
            with fails_after(30):
                result = simulate(trace, p, "fixed:1", SimConfig(offload=offload))
        except NightjarInputError as exc:
            one_line_error(exc)
            continue
        assert all(np.isfinite(r.finish_s) for r in result.requests)


@FUZZ
@given(JSON)
def test_profile_parser_on_any_json(doc: Any) -> None:
    if not isinstance(doc, dict):
        return
    try:
        Profile.from_json(doc, "fuzz.json")
    except NightjarInputError as exc:
        one_line_error(exc)


# -- policy specs ---------------------------------------------------------------------

NAMES = sorted(registered())
SPEC = st.one_of(
    st.text(max_size=20),
    st.builds(lambda n, sep, arg: n + sep + arg, st.sampled_from(NAMES),
              st.sampled_from([":", "", "::"]),
              st.text(alphabet="0123456789-:,.²x ", max_size=14)),
)


@FUZZ
@given(SPEC, st.integers(min_value=1, max_value=8))
def test_policy_specs_build_a_policy_or_one_line(spec: str, gamma_max: int) -> None:
    profile = load_profile(A100)
    try:
        policy = make_policy(spec, PolicyEnv(gamma_max=gamma_max, latency=profile))
    except NightjarInputError as exc:
        one_line_error(exc)
        return
    assert isinstance(policy, Policy)


# -- importers ------------------------------------------------------------------------

CELL = st.one_of(st.sampled_from(["0", "1", "7", "nan", "inf", "-1", "1e400", str(2**70),
                                  "2023-11-16 18:15:46.6805900", "x", "", "1.5", "²"]),
                 st.text(alphabet="0123456789.:- e", max_size=12))


@FUZZ
@given(st.lists(st.lists(CELL, min_size=2, max_size=4), max_size=6),
       st.sampled_from(["TIMESTAMP,ContextTokens,GeneratedTokens", "TIMESTAMP,ContextTokens",
                        "a,b,c"]))
def test_azure_import_gives_a_trace_or_one_line(rows: list[list[str]], header: str) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "az.csv"
        path.write_text(header + "\n" + "\n".join(",".join(r) for r in rows) + "\n")
        try:
            trace, report = import_azure_csv(path)
        except NightjarInputError as exc:
            one_line_error(exc)
            return
    check_trace(trace)
    assert report.kept == len(trace)


TURN = st.fixed_dictionaries({}, optional={"from": st.sampled_from(["human", "gpt", "user", 3]),
                                           "value": st.one_of(st.text(max_size=30), SCALARS)})


@FUZZ
@given(st.one_of(JSON, st.lists(st.fixed_dictionaries(
    {"conversations": st.lists(TURN, max_size=4)}), max_size=4)),
    st.sampled_from([1.0, math.inf, 0.0, -1.0, math.nan]))
def test_sharegpt_import_gives_a_trace_or_one_line(doc: Any, rate: float) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "sg.json"
        path.write_text(json.dumps(doc))
        try:
            trace, _ = import_sharegpt(path, rate_rps=rate)
        except NightjarInputError as exc:
            one_line_error(exc)
            return
    check_trace(trace)


# -- the CLI --------------------------------------------------------------------------

SMALL_TRACE = '{"requests": [{"arrival_s": 0, "prompt_tokens": 40, "output_tokens": 5},' \
              ' {"arrival_s": 0.2, "prompt_tokens": 30, "output_tokens": 3}]}'
BIG_TRACE = '{"requests": [{"arrival_s": 0, "prompt_tokens": 10000000, "output_tokens": 5},' \
            ' {"arrival_s": 0.1, "prompt_tokens": 30, "output_tokens": 3}]}'
ODD_TEXT = st.one_of(st.sampled_from(["", "x", "nan", "inf", "-1", "1e-300", "²", ".."]),
                     st.text(max_size=8))
# Per flag: mostly values a user would type, sometimes odd ones, so that runs get deep.
VALUES: dict[str, list[str]] = {
    "--policy": ["nospec", "fixed:1", "fixed:3", "fixed:99", "schedule", "schedule:",
                 "schedule:1-4:2,5-:0", "nightjar", "nightjar+", "dsd", "oracle", "tetris",
                 "sglang", "banditspec", "all", "fixed:²"],
    "--seed": ["0", "1", "7", "-1", str(2**80)],
    "--gamma-max": ["1", "2", "3", "4", "0", "9"],
    "--draft-kv": ["skip", "sync"], "--acceptance": ["geometric", "positional"],
    "--offload": ["on", "off"], "--reload": ["drain", "migrate"],
    "--on-unfit": ["refuse", "skip"],
    "--profile": [A100, "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b", "nope.json"],
    "--window": ["0.1", "1", "1e-300", "inf"],
    "--rate": ["0.5", "2", "0", "1e300"], "--duration": ["1", "2", "0", "inf"],
    "--burstiness": ["1", "0.5", "1e-30", "0.001"],
    "--segments": ["1:2", "2:1:0.5,1:1", "1:2:1e-9", "1:"],
    "--workload": ["sharegpt", "alpaca", "nope"],
}


def argv_strategy(tmp: Path) -> st.SearchStrategy[list[str]]:
    def flags(names: list[str]) -> st.SearchStrategy[list[str]]:
        pair = st.sampled_from(names).flatmap(lambda f: st.tuples(
            st.just(f), st.one_of(st.sampled_from(VALUES[f]), st.sampled_from(VALUES[f]),
                                  ODD_TEXT)).map(list))
        return st.lists(pair, max_size=4).map(lambda ps: [x for p in ps for x in p])

    traces = st.sampled_from([str(tmp / "small.json"), str(tmp / "big.json")])
    sim = st.tuples(traces, flags([k for k in VALUES if k in SIM_FLAGS])).map(
        lambda t: ["sim", "--quiet", "--no-report", "--no-oracle", "--trace", t[0], *t[1],
                   "--out", str(tmp / "out"), "--force"])
    show = st.tuples(traces, flags(TRACE_SHOW)).map(lambda t: ["trace", "show", t[0], *t[1]])
    gen = flags(GEN_FLAGS).map(lambda f: ["trace", "gen", "--rate", "1", "--duration", "2",
                                          *f, "--out", str(tmp / "g.json"), "--force"])
    prof = st.sampled_from([["profile", "--list"], ["profile", "--show", A100],
                            ["profile", "--show", A100, "--context", "nan"],
                            ["profile", "--roofline", "--gpu", "rtx4090"]])
    junk = st.lists(ODD_TEXT, max_size=4)
    return st.one_of(sim, sim, show, gen, prof, junk)


SIM_FLAGS = ["--policy", "--seed", "--gamma-max", "--draft-kv", "--acceptance", "--offload",
             "--reload", "--on-unfit", "--profile"]
TRACE_SHOW = ["--seed", "--window"]
GEN_FLAGS = ["--rate", "--duration", "--burstiness", "--segments", "--seed", "--workload"]


def test_cli_fuzz_exits_0_or_2_and_never_a_traceback() -> None:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        (tmp / "small.json").write_text(SMALL_TRACE)
        (tmp / "big.json").write_text(BIG_TRACE)

        @settings(max_examples=400, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow])
        @given(argv_strategy(tmp))
        def run(argv: list[str]) -> None:
            out, err = io.StringIO(), io.StringIO()
            code: Any
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), \
                    fails_after(60):  # a hang is a failure, not a stuck test run
                try:
                    code = main(argv)
                except SystemExit as exc:  # argparse: usage errors (2) and --help (0)
                    code = exc.code
            assert code in (0, 2), (argv, err.getvalue()[-1000:])
            assert "Traceback" not in err.getvalue()
            if code == 2 and err.getvalue():
                assert err.getvalue().count("\n") == 1, err.getvalue()

        run()
