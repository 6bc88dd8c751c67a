"""The validator: a run against its own profile shows no step-model error, a
profile twice as slow shows +100%, and bad run folders are one-line errors."""

import json
from pathlib import Path

import pandas as pd
import pytest

from nightjar.cli import main
from nightjar.core.acceptance import alpha_from_ratio
from nightjar.errors import NightjarInputError
from nightjar.fidelity.compare import compare_summaries, step_model_error, trace_of
from nightjar.profile.profile import DEFAULT_PROFILE, Profile, load_profile
from nightjar.report.folder import write_all
from nightjar.results.read import load_run
from nightjar.results.run_set import ResultSet
from nightjar.sim import SimConfig, simulate
from nightjar.trace.trace import load_trace


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("runs")
    result = simulate(load_trace("steady_low"), load_profile(DEFAULT_PROFILE), "fixed:3")
    write_all(ResultSet.build([result]), out)
    return out / "fixed-3"


def slower(profile: Profile, factor: float) -> Profile:
    data = profile.to_json()
    data["decode"] = [[b, g, c, s * factor, d * factor, v * factor]
                      for b, g, c, s, d, v in data["decode"]]
    return Profile.from_json(data, "slower")


def test_round_trip_and_zero_error_against_its_own_profile(run_dir: Path) -> None:
    run = load_run(run_dir)
    profile = load_profile(DEFAULT_PROFILE)
    err = step_model_error(run, profile)
    assert err.steps > 1000
    assert err.median_abs_pct < 1e-6
    sim = simulate(trace_of(run), profile, run.policy, SimConfig(seed=3))
    table = compare_summaries(run, sim).set_index("metric")
    # Same arrivals and lengths, acceptance recovered from the measured ratio: the
    # replay lands within a few percent (only the acceptance draws differ).
    assert abs(table.loc["throughput_tok_s", "error_pct"]) < 3
    assert abs(table.loc["tpot_s_mean", "error_pct"]) < 10
    assert abs(table.loc["acceptance", "error_pct"]) < 10


def test_a_profile_twice_as_slow_shows_plus_100_percent(run_dir: Path) -> None:
    err = step_model_error(load_run(run_dir), slower(load_profile(DEFAULT_PROFILE), 2.0))
    assert err.median_abs_pct == pytest.approx(100.0, abs=0.01)
    assert err.mean_pct == pytest.approx(100.0, abs=0.01)


def test_alpha_from_ratio_inverts_the_geometric_law() -> None:
    import numpy as np

    a = np.array([0.1, 0.5, 0.8, np.nan])
    g = 3.0
    ratio = a * (1 - a**g) / ((1 - a) * g)
    np.testing.assert_allclose(alpha_from_ratio(ratio, g)[:3], a[:3], atol=1e-6)
    assert np.isnan(alpha_from_ratio(ratio, g)[3])


def test_not_a_run_folder(tmp_path: Path) -> None:
    with pytest.raises(NightjarInputError, match="missing"):
        load_run(tmp_path)


def test_cli(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", "--live-run", str(run_dir), "--profile", DEFAULT_PROFILE,
                 "--out", str(tmp_path / "v")])
    assert code == 0
    assert (tmp_path / "v" / "step_model.csv").is_file()
    assert "median |error| 0.0%" in capsys.readouterr().out
    assert main(["validate", "--live-run", str(tmp_path), "--profile", DEFAULT_PROFILE]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
    # A run folder has no rounds to take a time base from (tests/test_agreement.py).
    assert main(["validate", "--live-run", str(run_dir), "--profile", DEFAULT_PROFILE,
                 "--time-base", "round"]) == 2
    err = capsys.readouterr().err
    assert "needs a benchmark folder" in err and err.count("\n") == 1


def test_the_run_time_base_takes_out_a_run_made_on_a_slower_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    profile = load_profile(DEFAULT_PROFILE)
    result = simulate(load_trace("steady_low"), profile.scaled(1.5), "nospec")
    write_all(ResultSet.build([result]), tmp_path / "runs")
    argv = ["validate", "--live-run", str(tmp_path / "runs" / "nospec"), "--profile",
            DEFAULT_PROFILE]
    assert main([*argv, "--out", str(tmp_path / "plain")]) == 0
    assert main([*argv, "--time-base", "run", "--out", str(tmp_path / "own")]) == 0
    assert "priced on the profile times its own time base, x1.500" in capsys.readouterr().out
    plain, own = (pd.read_csv(tmp_path / d / "summary_comparison.csv").set_index("metric")
                  for d in ("plain", "own"))
    assert plain.loc["tpot_s_mean", "error_pct"] < -20.0  # priced at the profile's speed
    assert abs(own.loc["tpot_s_mean", "error_pct"]) < 1e-6


def test_agreement_ranks_policies_and_catches_a_swap(tmp_path: Path) -> None:
    from nightjar.fidelity.compare import agreement

    trace, profile = load_trace("steady_low"), load_profile(DEFAULT_PROFILE)
    nospec = simulate(trace, profile, "nospec")
    fixed = simulate(trace, profile, "fixed:3")
    same = agreement([(nospec, nospec), (fixed, fixed)])
    assert same.same_ranking
    assert (same.errors["error_pct"].abs() < 1e-9).all()
    # One run each separates no pair: a swapped simulator is then no miss, only
    # unresolved (the engine gave no order to hold against it).
    swapped = agreement([(nospec, fixed), (fixed, nospec)])
    assert swapped.same_ranking and swapped.separated == 0
    assert set(swapped.pairs["status"]) == {"unresolved"}
    assert set(swapped.ranking["by"]) == {"mean E2E", "throughput"}
    # Two repeats of each (paired by their order) separate the pair; the swap is caught.
    n2 = [simulate(trace, profile, "nospec", SimConfig(seed=s)) for s in (1, 2)]
    f2 = [simulate(trace, profile, "fixed:3", SimConfig(seed=s)) for s in (1, 2)]
    caught = agreement([(n2[0], f2[0]), (n2[1], f2[1]), (f2[0], n2[0]), (f2[1], n2[1])])
    assert caught.separated > 0 and not caught.same_ranking
    assert "MISS" in set(caught.pairs["status"])
    held = agreement([(r, r) for r in n2 + f2])
    assert held.same_ranking and held.separated == caught.separated


def test_cli_folder_of_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, profile = load_trace("steady_low"), load_profile(DEFAULT_PROFILE)
    cfg = SimConfig(max_num_seqs=64, max_num_batched_tokens=2048)
    runs = [simulate(trace, profile, p, cfg) for p in ("nospec", "fixed:3")]
    write_all(ResultSet.build(runs), tmp_path / "runs")
    code = main(["validate", "--live-run", str(tmp_path / "runs"), "--profile", DEFAULT_PROFILE,
                 "--out", str(tmp_path / "v")])
    assert code == 0
    out = capsys.readouterr().out
    assert "orders every pair the engine separated as the engine did: yes" in out
    assert (tmp_path / "v" / "ranking.csv").is_file()


def test_short_contexts_under_a_128_grid_are_priced_at_its_edge(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issues #13/#15: with the profiler's default contexts (128..512) `validate` refused
    # "context length 25 outside the table's range 128..512". Now such steps are
    # priced at the edge and counted, in the step model and in the replay.
    data = load_profile(DEFAULT_PROFILE).to_json()
    data["decode"] = [r for r in data["decode"] if 128 <= r[2] <= 512]
    data["draft_forward"] = [r for r in data["draft_forward"] if 128 <= r[1] <= 512]
    path = tmp_path / "grid128.json"
    path.write_text(json.dumps(data))
    run = load_run(run_dir)
    assert run.steps_frame()["mean_context_len"].min() < 128
    err = step_model_error(run, Profile.from_json(data, "grid128"))
    assert 0 < err.clamped <= err.steps
    assert main(["validate", "--live-run", str(run_dir), "--profile", str(path)]) == 0
    assert "priced off its grid" in capsys.readouterr().out


def test_agreement_over_repeats_averages_and_names_unresolved_pairs() -> None:
    from nightjar.fidelity.compare import agreement

    trace, profile = load_trace("steady_low"), load_profile(DEFAULT_PROFILE)
    nospec = [simulate(trace, profile, "nospec", SimConfig(seed=s)) for s in (1, 2)]
    fixed = [simulate(trace, profile, "fixed:3", SimConfig(seed=s)) for s in (1, 2)]
    agree = agreement([(r, r) for r in nospec + fixed])
    errors = agree.errors.set_index(["policy", "metric"])
    assert set(errors["runs"]) == {2}
    assert (errors["error_pct"].abs() < 1e-9).all()
    assert "±" in errors.loc[("fixed:3", "e2e_s_mean"), "live_95"]
    assert agree.same_ranking
    # One run each: no live order is resolved, and the check says which pairs.
    single = agreement([(nospec[0], nospec[0]), (fixed[0], fixed[0])])
    assert set(single.ranking["unresolved_live"]) <= {"nospec~fixed:3", "fixed:3~nospec"}


def test_cli_repeated_live_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, profile = load_trace("steady_low"), load_profile(DEFAULT_PROFILE)
    folders = []
    for seed in (1, 2):
        cfg = SimConfig(seed=seed, max_num_seqs=64, max_num_batched_tokens=2048)
        runs = [simulate(trace, profile, p, cfg) for p in ("nospec", "fixed:3")]
        write_all(ResultSet.build(runs), tmp_path / f"r{seed}")
        folders += ["--live-run", str(tmp_path / f"r{seed}")]
    code = main(["validate", *folders, "--profile", DEFAULT_PROFILE, "--out", str(tmp_path / "v")])
    assert code == 0
    out = capsys.readouterr().out
    assert "orders every pair the engine separated as the engine did: yes" in out
    assert "every live step priced by the simulator" in out
    assert (tmp_path / "v" / "step_replay-nospec-2.csv").is_file()
