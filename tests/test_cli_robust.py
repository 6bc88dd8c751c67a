"""Issue #13 problems 2, 5 and 7 through the command line: atomic output folders,
every input checked before the first simulation, safe default folder names, and no
silent loss or mislabel."""

import json
import os
from pathlib import Path
from typing import Any

import pytest

import nightjar.sim
from nightjar.cli import main
from nightjar.profile.profile import bundled_profiles, load_profile
from nightjar.results.outdir import MARKER, TMP_TAG, default_out_dir, safe_name
from tests.hang import fails_after

SMALL = '{"name": "%s", "requests": [{"arrival_s": 0, "prompt_tokens": 50, "output_tokens": 4}]}'


def sim(args: list[str], capsys: Any) -> tuple[int, str, str]:
    code = main(["sim", "--quiet", "--no-report", "--no-oracle", *args])
    out, err = capsys.readouterr()
    return code, out, err


def small_trace(tmp_path: Path, name: str = "small") -> str:
    path = tmp_path / "small.json"
    path.write_text(SMALL % name)
    return str(path)


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if TMP_TAG in p.name]


# -- problem 2: atomic outputs, inputs checked up front ------------------------------

def test_a_typo_in_the_last_policy_fails_before_any_simulation(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*a: Any, **k: Any) -> None:
        raise AssertionError("simulated before every input was checked")

    monkeypatch.setattr(nightjar.sim, "simulate_many", never)
    out = tmp_path / "o"
    code, _, err = sim(["--trace", small_trace(tmp_path), "--policy", "nospec",
                        "--policy", "fixed:3", "--policy", "nightjr", "--out", str(out)], capsys)
    assert code == 2 and "unknown policy 'nightjr'" in err and err.count("\n") == 1
    assert not out.exists() and not leftovers(tmp_path)


@pytest.mark.parametrize(
    "bad",
    [["--seed", "-1"], ["--policy", "fixed:x"], ["--gamma-max", "0"],
     ["--profile", "nope.json"], ["--reload", "migrate", "--offload", "off"]],
)
def test_a_failed_run_leaves_nothing_that_blocks_its_rerun(
    tmp_path: Path, capsys: Any, bad: list[str]
) -> None:
    out = tmp_path / "o"
    trace = small_trace(tmp_path)
    code, _, err = sim(["--trace", trace, "--out", str(out), *bad], capsys)
    assert code == 2 and err.count("\n") == 1
    assert not out.exists() and not leftovers(tmp_path)
    code, _, _ = sim(["--trace", trace, "--policy", "nospec", "--out", str(out)], capsys)
    assert code == 0 and (out / MARKER).is_file() and (out / "nospec" / "steps.csv").is_file()


def test_an_interrupted_run_leaves_nothing_behind(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = nightjar.sim.simulate_many

    def interrupted(*a: Any, **k: Any) -> None:
        assert leftovers(tmp_path), "the run writes into a temporary folder"
        raise KeyboardInterrupt

    monkeypatch.setattr(nightjar.sim, "simulate_many", interrupted)
    out = tmp_path / "o"
    trace = small_trace(tmp_path)
    code, _, _ = sim(["--trace", trace, "--policy", "nospec", "--out", str(out)], capsys)
    assert code == 130
    assert not out.exists() and not leftovers(tmp_path)
    monkeypatch.setattr(nightjar.sim, "simulate_many", real)
    code, _, _ = sim(["--trace", trace, "--policy", "nospec", "--out", str(out)], capsys)
    assert code == 0 and (out / "summary.csv").is_file()


def test_force_replaces_our_files_and_keeps_the_users(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    trace = small_trace(tmp_path)
    code, _, _ = sim(["--trace", trace, "--policy", "nospec", "--out", str(out)], capsys)
    assert code == 2  # a user's folder is refused without --force
    for _ in range(2):
        code, _, _ = sim(["--trace", trace, "--policy", "nospec", "--out", str(out), "--force"],
                         capsys)
        assert code == 0
    assert (out / "notes.txt").read_text() == "keep me"
    assert (out / "nospec" / "requests.csv").is_file() and not leftovers(tmp_path)


# -- problem 5: default folder names ------------------------------------------------

@pytest.mark.parametrize("name", ["../../X", "/tmp/abs/X", "a/../../b", "..", "x" * 300, ""])
def test_a_trace_name_never_escapes_reports(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    work = tmp_path / "w"
    work.mkdir()
    monkeypatch.chdir(work)
    trace = small_trace(tmp_path, name)
    code, _, _ = sim(["--trace", trace, "--policy", "nospec"], capsys)
    assert code == 0
    made = [p for p in (work / "reports").iterdir()]
    assert len(made) == 1 and (made[0] / "summary.csv").is_file()
    assert sorted(p.name for p in work.iterdir()) == ["reports"]  # nothing written elsewhere
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.json", "w"]
    assert len(made[0].name) <= 100 and ".." not in made[0].name


def test_default_folders_do_not_collide_within_a_second(
    tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    trace = small_trace(tmp_path)
    for _ in range(3):
        assert sim(["--trace", trace, "--policy", "nospec"], capsys)[0] == 0
    assert len(list((tmp_path / "reports").iterdir())) == 3
    first = default_out_dir("t", tmp_path)
    first.mkdir()
    assert default_out_dir("t", tmp_path) != first


def test_safe_name() -> None:
    assert safe_name("../../etc/passwd") == "etc_passwd"
    assert safe_name("/abs") == "abs" and safe_name("..") == "trace"
    assert safe_name("a..b") == "a.b" and len(safe_name("y" * 500)) == 64


# -- problem 7: silent losses and mislabels -------------------------------------------

@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--policy", "fixed:99"], "gamma 99 exceeds gamma_max 4"),
        (["--policy", "fixed:9", "--gamma-max", "4"], "gamma 9 exceeds gamma_max 4"),
        (["--policy", "fixed:4", "--gamma-max", "3"], "gamma 4 exceeds gamma_max 3"),
        (["--policy", "schedule:1-8:6"], "gamma 6 exceeds gamma_max 4"),
        (["--policy", "schedule:"], "no rows after ':'"),
        (["--policy", "nospec:"], "takes no argument"),
        (["--policy", "nightjar:"], "takes no argument"),
        (["--policy", "nospec", "--reload", "migrate", "--offload", "off"],
         "--reload migrate needs --offload on"),
    ],
)
def test_mislabels_are_one_line_errors(
    tmp_path: Path, capsys: Any, args: list[str], needle: str
) -> None:
    code, _, err = sim(["--trace", small_trace(tmp_path), "--out", str(tmp_path / "o"), *args],
                       capsys)
    assert code == 2 and needle in err and err.count("\n") == 1


def test_default_policies_and_all_fit_a_small_gamma_max(tmp_path: Path, capsys: Any) -> None:
    # fixed:3, fixed:4 and the default schedule (gamma 3) would run mislabelled at
    # gamma_max 2, so the defaults and `all` leave them out rather than fail.
    out = tmp_path / "o"
    code, _, _ = sim(["--trace", small_trace(tmp_path), "--gamma-max", "2", "--policy", "all",
                      "--out", str(out)], capsys)
    assert code == 0
    slugs = {p.name for p in out.iterdir() if p.is_dir()}
    assert {"fixed-1", "fixed-2"} <= slugs and not {"fixed-3", "fixed-4"} & slugs
    assert not any(s.startswith("schedule") for s in slugs)


def test_plain_schedule_is_vllms_default_table(tmp_path: Path, capsys: Any) -> None:
    code, _, _ = sim(["--trace", small_trace(tmp_path), "--policy", "schedule",
                      "--out", str(tmp_path / "o")], capsys)
    assert code == 0


def test_unknown_profile_keys_are_refused(tmp_path: Path, capsys: Any) -> None:
    data = load_profile("a100-80gb/vicuna-13b+vicuna-68m").to_json()
    data["acceptance"]["sharegpt"]["acceptence"] = 0.9
    path = tmp_path / "typo.json"
    path.write_text(json.dumps(data))
    code, _, err = sim(["--trace", small_trace(tmp_path), "--profile", str(path),
                        "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "acceptence" in err and "did you mean 'acceptance'" not in err
    assert "acceptance.sharegpt.acceptence" in err and err.count("\n") == 1
    for key, where in (("memroy", ""), ("notez", "")):
        bad = dict(data, **{key: 1})
        bad["acceptance"]["sharegpt"].pop("acceptence", None)
        path.write_text(json.dumps(bad))
        code, _, err = sim(["--trace", small_trace(tmp_path), "--profile", str(path),
                            "--out", str(tmp_path / "o")], capsys)
        assert code == 2 and f"{where}{key}" in err and "did you mean" in err


def test_bundled_profiles_still_load() -> None:
    for name in bundled_profiles():
        assert load_profile(name).memory.kv_blocks(True) > 0


def test_a_fifo_as_profile_does_not_block(tmp_path: Path, capsys: Any) -> None:
    fifo = tmp_path / "p.json"
    os.mkfifo(fifo)
    with fails_after(20):
        code, _, err = sim(["--trace", small_trace(tmp_path), "--profile", str(fifo),
                            "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "not a regular file" in err


def test_live_refuses_reload_migrate_without_offload() -> None:
    from nightjar.cli import build_parser
    from nightjar.commands.live import memory_settings
    from nightjar.errors import NightjarInputError

    args = build_parser().parse_args(["live", "--model", "m", "--reload", "migrate"])
    with pytest.raises(NightjarInputError, match="--reload migrate needs --offload on"):
        memory_settings(args)
    args = build_parser().parse_args(["live", "--model", "m", "--reload", "migrate",
                                      "--offload", "on"])
    assert memory_settings(args) is not None  # accepted with --offload on


def test_live_offload_auto_is_on_only_where_freed_bytes_become_blocks() -> None:
    # Without --alias-draft the live engine can only emulate the freed memory with a
    # ballast withheld while the draft is resident, which costs capacity a server
    # without Nightjar has: auto stays off there, and thresholds ask for on.
    from nightjar.cli import build_parser
    from nightjar.commands.live import memory_settings
    from nightjar.errors import NightjarInputError

    parse = build_parser().parse_args
    assert parse(["live", "--model", "m"]).offload == "auto"
    assert memory_settings(parse(["live", "--model", "m"])) is None
    assert memory_settings(parse(["live", "--model", "m", "--alias-draft"])) is not None
    with pytest.raises(NightjarInputError, match="--k-offload sets the memory controller"):
        memory_settings(parse(["live", "--model", "m", "--k-offload", "5"]))


def test_writing_a_trace_or_profile_into_a_fifo_is_refused(tmp_path: Path, capsys: Any) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    with fails_after(20):
        assert main(["trace", "gen", "--rate", "1", "--duration", "2", "--out", str(fifo),
                     "--force"]) == 2
        assert main(["profile", "--roofline", "--gpu", "a100-80gb", "--model", "vicuna-13b",
                     "--draft", "vicuna-68m", "--out", str(fifo), "--force"]) == 2
    assert capsys.readouterr().err.count("not a regular file") == 2


def test_validate_writes_its_folder_whole_or_not_at_all(tmp_path: Path, capsys: Any) -> None:
    run = tmp_path / "run"
    assert sim(["--trace", small_trace(tmp_path), "--policy", "nospec", "--out", str(run)],
               capsys)[0] == 0
    out = tmp_path / "val"
    argv = ["validate", "--live-run", str(run / "nospec"), "--out", str(out), "--profile"]
    assert main([*argv, "nope.json"]) == 2
    assert not out.exists() and not leftovers(tmp_path)
    assert main([*argv, "a100-80gb/vicuna-13b+vicuna-68m"]) == 0
    assert (out / "step_model.csv").is_file() and (out / MARKER).is_file()
    assert not leftovers(tmp_path)
