"""The agreement check over a benchmark folder, on simulated "live" rounds.

A benchmark folder is written from simulator runs standing in for live ones (three
rounds, the seeds differing), so that the check's arithmetic can be asserted exactly:
a simulator that reproduces the runs agrees on every separated pair with 0% error, one
that swaps two policies is caught on the pairs the "engine" separated, and a measured
profile made under another CPU binding is refused.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from nightjar.cli import main
from nightjar.fidelity.agreement import bench_agreement
from nightjar.profile.profile import load_profile
from nightjar.report.folder import write_all
from nightjar.results.bench import RoundRun, read_bench, write_meta, write_tables
from nightjar.results.metrics import summarize
from nightjar.results.run_set import ResultSet
from nightjar.sim import SimConfig, simulate
from nightjar.trace.trace import load_trace

PROFILE = "a100-80gb/vicuna-13b+vicuna-68m"
LABELS = ("nospec", "fixed:3", "nospec#2")


def _bench(tmp: Path, binding: str = "0-1", speeds: tuple[float, ...] = (1.0, 1.0, 1.0),
           labels: tuple[str, ...] = LABELS) -> Path:
    """Three rounds of "live" runs; in round r the machine is ``speeds[r - 1]`` times as
    slow as when the profile was measured."""
    trace, profile = load_trace("steady_low"), load_profile(PROFILE)
    out = tmp / "bench"
    recorded = []
    for r in (1, 2, 3):
        cfg = SimConfig(seed=r, max_num_seqs=64, max_num_batched_tokens=2048, gamma_max=3)
        results = []
        machine = profile if speeds[r - 1] == 1.0 else profile.scaled(speeds[r - 1])
        for label in labels:
            res = simulate(trace, machine, label.removesuffix("#2"), cfg)
            res.policy = label
            results.append(res)
        rs = ResultSet.build(results, oracle_policy=None)
        write_all(rs, out / f"round-{r}", force=True)
        for pos, (res, run) in enumerate(zip(results, rs.runs, strict=True), 1):
            recorded.append(RoundRun(r, pos, res.policy, res, {"foreign_pct": 1.0}, slug=run.slug))
    write_tables(out, recorded)
    write_meta(out, {"trace": trace.name, "policies": ["nospec", "fixed:3"], "gamma_max": 3,
                     "draft_kv": "skip", "max_num_seqs": 64, "seed": 0,
                     "max_num_batched_tokens": 2048,
                     "cpu_binding": {"bind": binding, "omp_num_threads": None,
                                     "source": "nightjar"}}, recorded)
    return out


def test_the_folder_reads_back_with_rounds_and_labels(tmp_path: Path) -> None:
    record = read_bench(_bench(tmp_path))
    assert sorted((r.round, r.label) for r in record.runs) == sorted(
        (r, label) for r in (1, 2, 3) for label in LABELS)
    pairs = pd.read_csv(record.folder / "pairs.csv")
    assert set(pairs["rounds"]) == {3}
    assert set(pairs.loc[pairs["noise_floor"] == 1, "b"]) == {"nospec#2"}


def test_a_faithful_simulator_agrees_on_every_separated_pair(tmp_path: Path) -> None:
    record = read_bench(_bench(tmp_path))
    faithful = {(r.round, r.label): {k: float(v) for k, v in summarize(r.result).as_dict().items()
                                     if isinstance(v, int | float)} for r in record.runs}
    agree = bench_agreement(record.runs, faithful)
    statuses = {p.status for p in agree.pairs}
    assert "MISS" not in statuses and "same" in statuses  # steady_low separates them
    assert (agree.errors["error_pct"].abs() < 1e-9).all()
    # The noise floor: the same simulated policy twice is exactly no difference.
    assert (agree.noise["diff_pct"].abs() < 1e-9).all() and not agree.noise["separated"].any()
    # Swap the two policies' simulated outcomes: every separated pair is a miss.
    swapped = {(r, {"nospec": "fixed:3", "fixed:3": "nospec"}.get(lab, lab)): v
               for (r, lab), v in faithful.items()}
    caught = bench_agreement(record.runs, swapped)
    assert {p.status for p in caught.pairs if p.live.separated} == {"MISS"}
    assert {p.status for p in caught.pairs if not p.live.separated} <= {"unresolved"}


def test_validate_reads_a_benchmark_folder(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench(tmp_path)
    code = main(["validate", "--live-run", str(bench), "--profile", PROFILE,
                 "--out", str(tmp_path / "v")])
    assert code == 0
    out = capsys.readouterr().out
    assert "pairs separated live; the simulator orders" in out
    pairs = pd.read_csv(tmp_path / "v" / "pairs.csv")
    assert "MISS" not in set(pairs["status"])  # the "live" runs are this simulator's
    errors = pd.read_csv(tmp_path / "v" / "errors.csv").set_index("policy")
    # nospec draws nothing: replayed exactly. fixed:3 replays each request's measured
    # acceptance with fresh draws of its accepts: close, not equal.
    assert errors.loc["nospec", "error_pct"].abs().max() < 1e-6
    assert errors.loc["fixed:3", "error_pct"].abs().max() < 5.0
    assert set(errors.index) == {"nospec", "fixed:3"}  # the noise twin is no policy
    assert (tmp_path / "v" / "step_replay.csv").is_file()


def test_the_round_time_base_prices_each_round_at_its_machines_speed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The machine ran round 2 at 1.3x and round 3 at 0.8x the profile's times.
    bench = _bench(tmp_path, speeds=(1.0, 1.3, 0.8))
    argv = ["validate", "--live-run", str(bench), "--profile", PROFILE]
    assert main([*argv, "--out", str(tmp_path / "plain")]) == 0
    assert main([*argv, "--time-base", "round", "--out", str(tmp_path / "round")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "round 1 x1.000 (nospec x1.000, nospec#2 x1.000); round 2 x1.300" in out
    assert "round 3 x0.800" in out
    plain, based = (pd.read_csv(tmp_path / d / "errors.csv").set_index(["policy", "metric"])
                    for d in ("plain", "round"))
    # At the profile's speed the slow and fast rounds miss TPOT by -23% and +25%, which
    # the interval shows; at each round's own speed nospec is exact (priced by its twin,
    # which ran at the same speed) and fixed:3 within its fresh acceptance draws.
    tpot = ("nospec", "tpot_s_mean")
    assert plain.loc[tpot, "error_hi"] - plain.loc[tpot, "error_lo"] > 10.0
    assert based.loc["nospec", "error_pct"].abs().max() < 1e-6
    assert based.loc["fixed:3", "error_pct"].abs().max() < 5.0
    # The replay too: every step priced at its round's speed.
    replay = pd.read_csv(tmp_path / "round" / "step_replay.csv")
    assert replay.loc[replay["policy"] == "nospec", "error_pct"].abs().max() < 1e-6


def test_the_run_time_base_prices_each_run_at_its_own_speed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Round 2's nospec ran at 1.3x; the "engine" took each run at its own speed, and so
    # does the run time base, twin or not.
    bench = _bench(tmp_path, speeds=(1.0, 1.3, 0.8))
    assert main(["validate", "--live-run", str(bench), "--profile", PROFILE,
                 "--time-base", "run", "--out", str(tmp_path / "run")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "round 2 nospec x1.300, fixed:3 x1.300, nospec#2 x1.300" in out
    errors = pd.read_csv(tmp_path / "run" / "errors.csv").set_index("policy")
    assert errors.loc["nospec", "error_pct"].abs().max() < 1e-6
    assert errors.loc["fixed:3", "error_pct"].abs().max() < 5.0


def test_the_run_time_base_needs_a_decode_step() -> None:
    from nightjar.core.records import RunResult
    from nightjar.errors import NightjarInputError
    from nightjar.fidelity.time_base import run_time_base

    empty = RunResult(policy="nospec", engine="live", trace="t", profile=PROFILE, seed=0,
                      duration_s=0.0)
    with pytest.raises(NightjarInputError, match="no pure decode step"):
        run_time_base(empty, load_profile(PROFILE), sync=False)


def test_the_round_time_base_needs_the_noise_twin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _bench(tmp_path, labels=("nospec", "fixed:3"))
    assert main(["validate", "--live-run", str(bench), "--profile", PROFILE,
                 "--time-base", "round"]) == 2
    err = capsys.readouterr().err
    assert "noise twin" in err and err.count("\n") == 1, err


def test_a_profile_under_another_binding_is_refused(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    bench = _bench(tmp_path, binding="auto")
    data = load_profile(PROFILE).to_json()
    data["source"] = "measured"
    data["measured"] = {"cpu_binding": {"bind": "0-1", "omp_num_threads": None,
                                        "source": "nightjar"}}
    path = tmp_path / "measured.json"
    path.write_text(json.dumps(data))
    assert main(["validate", "--live-run", str(bench), "--profile", str(path)]) == 2
    err = capsys.readouterr().err
    assert "measured with VLLM_CPU_OMP_THREADS_BIND=0-1" in err and err.count("\n") == 1
    assert main(["validate", "--live-run", str(bench), "--profile", str(path),
                 "--any-binding"]) == 0
    assert "WARNING" in capsys.readouterr().out


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda m: m["runs"][0].update(slug="../../elsewhere"), "slug must name a folder"),
    (lambda m: m["runs"][0].update(round="one"), "round must be an integer"),
    (lambda m: m.update(runs={"a": 1}), "no list of runs"),
    (lambda m: m.update(gamma_max="3"), "gamma_max must be an integer"),
    (lambda m: m.update(cpu_binding={"bind": "0-1", "omp_num_threads": "x"}),
     "omp_num_threads must be an integer"),
])
def test_a_damaged_benchmark_record_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: object, needle: str
) -> None:
    bench = _bench(tmp_path)
    meta = json.loads((bench / "bench.json").read_text())
    edit(meta)  # type: ignore[operator]
    (bench / "bench.json").write_text(json.dumps(meta))
    assert main(["validate", "--live-run", str(bench), "--profile", PROFILE]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_an_unusable_out_is_refused_before_any_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = _bench(tmp_path)
    taken = tmp_path / "taken"
    taken.write_text("a file, not a folder")
    assert main(["validate", "--live-run", str(bench), "--profile", PROFILE,
                 "--out", str(taken)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured
    assert taken.read_text() == "a file, not a folder"


def test_trace_speed_reads_each_run_s_speed_and_pairs_two_traces_by_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.scripts import load_script

    script = load_script("experiments/trace_speed.py")
    agree = tmp_path / "agree"
    agree.mkdir()
    for name, speeds in (("a", (1.0, 1.3, 0.8)), ("b", (1.25, 1.3, 1.0))):
        _bench(tmp_path / name, speeds=speeds).rename(agree / f"bench-{name}")
    found = script.speeds(agree / "bench-a", Path(PROFILE))
    assert {r: [round(x, 3) for x in xs] for r, xs in found.items()} == {
        1: [1.0] * 3, 2: [1.3] * 3, 3: [0.8] * 3}
    monkeypatch.setattr("sys.argv", ["trace_speed.py", str(agree), "--profile", PROFILE])
    script.main()
    out = " ".join(capsys.readouterr().out.split())
    # Round by round a/b: 1.0/1.25, 1.3/1.3, 0.8/1.0.
    assert "a / b, round by round: x0.867" in out and "(x0.800, x1.000, x0.800)" in out


def test_trace_speed_without_a_benchmark_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.scripts import load_script

    monkeypatch.setattr("sys.argv", ["trace_speed.py", str(tmp_path)])
    assert load_script("experiments/trace_speed.py").main() == 2
    err = capsys.readouterr().err
    assert "no bench-*/bench.json" in err and err.count("\n") == 1, err
