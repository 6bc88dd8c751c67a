"""The live benchmark's pure parts: the rotated schedule, paired statistics, the load
arithmetic, the CPU binding and the command's one-line errors (no vLLM needed)."""

from __future__ import annotations

import math
import os
from itertools import pairwise

import pytest

from nightjar.cli import main
from nightjar.errors import NightjarInputError
from nightjar.live import binding as bind
from nightjar.live.bench.rotation import BenchPlan
from nightjar.live.load import LoadMeter, Reading, window
from nightjar.results.paired import paired_diff


def test_rounds_rotate_and_the_noise_twin_sits_opposite() -> None:
    plan = BenchPlan(("a", "b", "c", "d"), 5, "a")
    rounds = [[s.label for s in r] for r in plan.rounds()]
    assert rounds[0] == ["a", "b", "c", "a#2", "d"]
    for prev, cur in pairwise(rounds):
        assert cur == prev[1:] + prev[:1]  # rotated by one place
    # Over len(labels) rounds every label takes every position once.
    for label in plan.labels:
        assert sorted(r.index(label) for r in rounds) == [0, 1, 2, 3, 4]
    slots = plan.rounds()[1]
    assert [s.policy for s in slots if s.is_noise_twin] == ["a"]
    assert plan.runs == 25


def test_several_traces_share_each_round_in_rotated_blocks() -> None:
    plan = BenchPlan(("a", "b"), 4, None, traces=3)
    assert plan.runs == 4 * 2 * 3
    one = BenchPlan(("a", "b"), 4, None)
    for r, (slots, alone) in enumerate(zip(plan.rounds(), one.rounds(), strict=True)):
        blocks = [slots[i:i + 2] for i in range(0, len(slots), 2)]
        # One block per trace, the traces' order rotated by one place per round...
        assert [b[0].trace for b in blocks] == [(r + k) % 3 for k in range(3)]
        for block in blocks:
            assert {s.trace for s in block} == {block[0].trace}
            # ...and within each, the policies as one trace's round runs them.
            assert [(s.label, s.position) for s in block] == [(s.label, s.position)
                                                               for s in alone]
    # Each trace still gets every policy once per round.
    for trace in range(3):
        runs = [(s.round, s.label) for r in plan.rounds() for s in r if s.trace == trace]
        assert sorted(runs) == sorted((s.round, s.label) for r in one.rounds() for s in r)


@pytest.mark.parametrize("kwargs, needle", [
    ({"policies": ("a",), "repeats": 1, "noise_policy": None}, "--repeats must be >= 2"),
    ({"policies": ("a", "a"), "repeats": 2, "noise_policy": None}, "given twice"),
    ({"policies": ("a",), "repeats": 2, "noise_policy": "b"}, "is not one of"),
    ({"policies": ("a",), "repeats": 2, "noise_policy": None, "traces": 0}, "at least one"),
])
def test_bad_plans_are_input_errors(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(NightjarInputError, match=needle):
        BenchPlan(**kwargs)  # type: ignore[arg-type]


def test_paired_difference_cancels_what_a_round_shares() -> None:
    # A round-wide drift (+10 s in round 2) moves both; the paired difference does not.
    values = {"a": {1: {"e2e_s_mean": 10.0}, 2: {"e2e_s_mean": 20.1}, 3: {"e2e_s_mean": 12.0}},
              "b": {1: {"e2e_s_mean": 11.0}, 2: {"e2e_s_mean": 21.0}, 3: {"e2e_s_mean": 13.1}}}
    p = paired_diff(values, "a", "b", "e2e_s_mean")
    assert p.diff.n == 3 and math.isclose(p.diff.mean, -1.0, abs_tol=1e-9)
    assert p.separated and p.sign == "<" and p.verdict() == "a beats b"  # lower E2E wins
    # Throughput: higher is better, so the same sign is the other verdict.
    values_t = {k: {r: {"throughput_tok_s": m["e2e_s_mean"]} for r, m in v.items()}
                for k, v in values.items()}
    assert paired_diff(values_t, "a", "b", "throughput_tok_s").verdict() == "b beats a"
    # Unpaired, the two means' intervals overlap widely: no claim would follow.
    one = {"a": {1: {"e2e_s_mean": 1.0}}, "b": {1: {"e2e_s_mean": 2.0}}}
    assert not paired_diff(one, "a", "b", "e2e_s_mean").separated
    mixed = {"a": {1: {"m": 1.0}, 2: {"m": 3.0}}, "b": {1: {"m": 2.0}, 2: {"m": 2.0}}}
    assert paired_diff(mixed, "a", "b", "m").verdict() == "unresolved"


def test_foreign_load_is_busy_minus_ours_on_the_engine_cores() -> None:
    a = Reading(0.0, {0: (0, 0), 1: (0, 0), 2: (0, 0)}, own=0)
    # 1 s at 100 ticks/s: cores 0-1 busy 100 + 60 ticks, ours 120; core 2 busy 50.
    b = Reading(1.0, {0: (100, 100), 1: (60, 100), 2: (50, 100)}, own=120)
    w = window(a, b, (0, 1))
    assert math.isclose(w.foreign_pct, 100.0 * 40 / 200)
    assert math.isclose(w.own_pct, 60.0) and math.isclose(w.elsewhere_pct, 50.0)
    assert w.per_core_busy_pct == {0: 100.0, 1: 60.0, 2: 50.0}
    # Ours can exceed what the cores show (tick rounding): never negative foreign load.
    assert window(a, Reading(1.0, b.cores, own=500), (0, 1)).foreign_pct == 0.0


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")
def test_the_meter_sees_our_own_work() -> None:
    with LoadMeter() as meter:
        x = 0
        for i in range(3_000_000):
            x += i
    rec = meter.record
    assert rec.available and rec.seconds > 0 and rec.own_pct > 0
    assert set(os.sched_getaffinity(0)) <= set(rec.per_core_busy_pct)


def test_core_lists_parse_and_format() -> None:
    assert bind.parse_cores("0-2,5") == [0, 1, 2, 5]
    assert bind.format_cores([5, 0, 1, 2]) == "0-2,5"
    assert bind.rank_groups(1, [0, 1]) == "0-1"
    assert bind.rank_groups(2, [0, 1, 2, 3]) == "0-1|2-3"
    assert bind.rank_groups(2, [0, 1, 2, 3], compact=False) == "0,1|2,3"
    for bad in ("x", "1,1", "-1", "", "3-1"):
        with pytest.raises(NightjarInputError):
            bind.parse_cores(bad)
    # A range no machine has is refused before it is built (it took 35 s and 4.4 GB).
    with pytest.raises(NightjarInputError, match="past any machine's"):
        bind.parse_cores("0-30000000")
    with pytest.raises(NightjarInputError, match="needs at least 3 CPU cores"):
        bind.rank_groups(3, [0, 1])


def test_default_binding_gives_the_engine_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(bind.BIND_ENV, raising=False)
    monkeypatch.delenv(bind.THREADS_ENV, raising=False)
    monkeypatch.delenv(bind.SIM_NUMA_ENV, raising=False)
    monkeypatch.setattr(bind, "_EXPORTED", {})
    b = bind.apply_binding(1, [0, 1])
    assert (b.bind, b.model_threads, b.process_threads, b.source) == ("0-1", 2, None, "nightjar")
    # The schedulers' OpenMP threads are vLLM's to set (it drops them to one).
    assert os.environ[bind.BIND_ENV] == "0-1" and bind.THREADS_ENV not in os.environ
    # Our own value is ours to change for the next engine (TP 2 here).
    b2 = bind.apply_binding(2, [0, 1])
    assert (b2.bind, b2.model_threads) == ("0|1", 1)
    # A value the user exported wins.
    monkeypatch.setenv(bind.BIND_ENV, "auto")
    monkeypatch.setenv(bind.THREADS_ENV, "1")
    user = bind.apply_binding(1, [0, 1])
    assert (user.bind, user.model_threads, user.process_threads, user.source) == (
        "auto", None, 1, "user")
    # The record round-trips through a summary's numeric extras and a JSON header.
    assert bind.binding_from_extras(b.extras()) is not None
    assert bind.binding_from_extras(b.extras()).same_as(b)  # type: ignore[union-attr]
    assert bind.binding_from_extras(user.extras()).bind == "auto"  # type: ignore[union-attr]
    assert bind.binding_from_json(b.to_json()) == b
    assert not b.same_as(user) and b.mask == 3 and user.cores == ()


@pytest.mark.parametrize("extra, needle", [
    (["--repeats", "1"], "--repeats must be >= 2"),
    (["--max-foreign", "150"], "--max-foreign must be a percentage"),
    (["--cores", "0-x"], "core list must look like"),
    (["--policy", "nospec", "--noise-policy", "fixed:3"], "is not one of"),
    # The runs are validated against the profile: a gamma it has no price for is
    # refused before the hour of measurement, not after it.
    (["--profile", "a100-80gb/vicuna-13b+vicuna-68m", "--gamma-max", "9"],
     "--gamma-max 9 exceeds the --profile's"),
    # Each trace's results go to bench-<name>/: two traces of one name would collide.
    (["--trace", "burst"], "--trace given twice with the name 'burst'"),
])
def test_bench_input_errors_are_one_line(
    extra: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "live", "--model", "m", "--trace", "burst", *extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err
