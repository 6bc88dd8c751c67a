"""``nightjar sim`` end to end, and its one-line errors with exit code 2."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nightjar.cli import main


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_sim_writes_csvs_summary_and_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_dir = tmp_path / "run"
    code, out, _ = run_cli(
        ["sim", "--trace", "steady_low", "--policy", "nospec", "--policy", "fixed:3",
         "--out", str(out_dir), "--quiet"],
        capsys,
    )
    assert code == 0
    assert "fixed:3" in out and "nospec" in out
    for policy in ("nospec", "fixed-3", "oracle"):
        for name in ("requests.csv", "steps.csv", "summary.json"):
            assert (out_dir / policy / name).is_file()
    assert (out_dir / "summary.csv").is_file()
    html = (out_dir / "report.html").read_text()
    assert "fixed:3" in html and "<script" in html


def test_refuses_to_write_into_a_users_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user_dir = tmp_path / "mine"
    user_dir.mkdir()
    (user_dir / "notes.txt").write_text("keep me")
    code, _, err = run_cli(
        ["sim", "--trace", "steady_low", "--policy", "nospec", "--out", str(user_dir)], capsys
    )
    assert code == 2
    assert (user_dir / "notes.txt").read_text() == "keep me"
    assert len(err.strip().splitlines()) == 1


def _bad(tmp_path: Path, text: str) -> str:
    path = tmp_path / "bad.json"
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("make_args", "needle"),
    [
        (lambda p: ["--trace", _bad(p, "{not json")], "bad.json"),
        (lambda p: ["--trace", _bad(p, json.dumps({"requests": []}))], "bad.json"),
        (
            lambda p: [
                "--trace",
                _bad(p, json.dumps({"requests": [
                    {"arrival_s": -1, "prompt_tokens": 5, "output_tokens": 5}
                ]})),
            ],
            "arrival_s",
        ),
        (lambda p: ["--trace", str(p / "missing.json")], "missing.json"),
        (lambda p: ["--policy", "warp-drive"], "warp-drive"),
        (lambda p: ["--policy", "fixed:x"], "fixed:x"),
        (lambda p: ["--profile", "no-such-gpu/model"], "no-such-gpu"),
        (lambda p: ["--out", "/proc/nightjar-cannot-write-here"], "/proc"),
        (lambda p: ["--gamma-max", "99"], "gamma"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], make_args, needle: str  # type: ignore[no-untyped-def]
) -> None:
    args = ["sim", "--trace", "steady_low", "--quiet", "--out", str(tmp_path / "o")]
    code, _, err = run_cli(args + make_args(tmp_path), capsys)
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert needle in lines[0]
    assert "Traceback" not in err


def test_unknown_flag_is_one_line_and_exit_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "nightjar.cli", "sim", "--warp", "9"],
        capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "--warp" in proc.stderr
