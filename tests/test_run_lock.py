"""One writer per output folder, `--force` over a run of any kind, and a failed run that
never blocks its rerun (nightjar.results.lock, nightjar.results.outdir)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import nightjar
from nightjar.cli import main
from nightjar.errors import NightjarInputError
from nightjar.results.lock import SUFFIX, busy, holding, lock_path
from nightjar.results.outdir import MARKER, check_out_dir, mark_finished, staged_out_dir
from nightjar.results.write import prepare_out_dir

SMALL = '{"name": "small", "requests": [{"arrival_s": 0, "prompt_tokens": 50, "output_tokens": 4}]}'
HOLD = """
import sys
from pathlib import Path
from nightjar.results.lock import holding
with holding(Path(sys.argv[1])):
    print("held", flush=True)
    sys.stdin.read()
"""


@contextmanager
def held_elsewhere(folder: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding ``folder``'s lock for the block."""
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(folder.resolve())],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc
    finally:
        if proc.poll() is None:
            assert proc.stdin is not None
            proc.stdin.close()
        proc.wait(timeout=60)


def cli(args: list[str], capsys: Any) -> tuple[int, str]:
    code = main(args)
    err = capsys.readouterr().err
    return code, err


def trace_file(tmp_path: Path) -> str:
    path = tmp_path / "small.json"
    path.write_text(SMALL)
    return str(path)


def sim_args(trace: str, out: Path, *more: str) -> list[str]:
    return ["sim", "--quiet", "--no-report", "--no-oracle", "--trace", trace,
            "--policy", "nospec", "--out", str(out), *more]


def sweep_args(trace: str, out: Path, *more: str) -> list[str]:
    return ["sweep", "--quiet", "--no-report", "--trace", trace, "--policy", "nospec",
            "--out", str(out), *more]


def test_a_second_writer_is_refused_in_one_line_and_the_first_is_untouched(
    tmp_path: Path, capsys: Any
) -> None:
    trace = trace_file(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    with held_elsewhere(out) as holder:
        assert busy(out.resolve()) == f"another nightjar run (pid {holder.pid})"
        for argv in (sim_args(trace, out, "--force"), sweep_args(trace, out, "--force")):
            code, err = cli(argv, capsys)
            assert code == 2
            assert err.count("\n") == 1 and f"pid {holder.pid}" in err, err
            assert "being written by" in err
        with pytest.raises(NightjarInputError, match="being written"):
            prepare_out_dir(out, force=True)
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    # The holder let go: its lock file went with it, and the folder is writable again.
    assert not lock_path(out.resolve()).exists()
    assert cli(sim_args(trace, out, "--force"), capsys)[0] == 0


def test_a_killed_writer_leaves_no_lock(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with held_elsewhere(out) as holder:
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait(timeout=60)
        # The kernel dropped the flock with the process; only its file is left.
        assert lock_path(out.resolve()).exists()
        assert busy(out.resolve()) is None
        with staged_out_dir(out) as tmp:
            (tmp / "x.txt").write_text("x")
    assert (out / "x.txt").read_text() == "x"


def test_the_lock_is_held_once_per_process_and_cleans_up(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "run"
    real = out.resolve()
    with holding(real), holding(real):  # the same process again: no deadlock
        assert lock_path(real).exists() and lock_path(real).name == f".run{SUFFIX}"
    assert not (tmp_path / "a").exists()  # the folders made for the lock went with it


def test_force_replaces_a_sweep_with_a_run_and_a_run_with_a_sweep(
    tmp_path: Path, capsys: Any
) -> None:
    trace = trace_file(tmp_path)
    out = tmp_path / "out"
    assert cli(sweep_args(trace, out), capsys)[0] == 0
    (out / "notes.md").write_text("mine")
    assert cli(sim_args(trace, out), capsys)[0] == 2  # a sweep is there: refused
    assert cli(sim_args(trace, out, "--force"), capsys)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MARKER, "notes.md", "nospec", "summary.csv"])
    assert [r.policy for r in nightjar.load_run(out)] == ["nospec"]

    assert cli(sweep_args(trace, out), capsys)[0] == 2  # a run is there: refused
    assert cli(sweep_args(trace, out, "--force"), capsys)[0] == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MARKER, "notes.md", "cells", "results.csv", "sweep.json"]
        + (["results.parquet"] if (out / "results.parquet").exists() else []))


def failed_live_run(out: Path, *also: str) -> None:
    """A live run, in a process of its own, that started writing ``out`` and then failed
    before finishing; ``also`` are the user's own files put there beside it."""
    script = f"""
import sys
from pathlib import Path
from nightjar.results.write import prepare_out_dir
out = Path({str(out)!r})
prepare_out_dir(out)
(out / "vllm.log").write_text("engine failed to start")
(out / ".steps-0.jsonl").write_text("")
for name in {list(also)!r}:
    (out / name).write_text("keep")
sys.exit(1)
"""
    assert subprocess.run([sys.executable, "-c", script], check=False).returncode == 1


def test_an_in_place_run_keeps_what_it_streamed_when_it_writes_its_tables(
    tmp_path: Path,
) -> None:
    out = tmp_path / "live"
    prepare_out_dir(out)  # `nightjar live` before the engine starts...
    (out / "vllm.log").write_text("engine log")
    (out / ".steps-0.jsonl").write_text("{}")
    prepare_out_dir(out, force=True)  # ... and its report writer, at the end
    assert (out / "vllm.log").read_text() == "engine log"
    assert (out / ".steps-0.jsonl").exists()
    mark_finished(out)  # once finished, the folder is a run like any other
    with pytest.raises(NightjarInputError, match="earlier nightjar run"):
        prepare_out_dir(out)


def test_a_failed_in_place_run_never_blocks_its_rerun(tmp_path: Path) -> None:
    out = tmp_path / "live"
    failed_live_run(out)
    # Nothing finished it. Its rerun needs no --force.
    check_out_dir(out)
    with staged_out_dir(out) as tmp:
        (tmp / "summary.csv").write_text("policy\n")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "summary.csv"]
    # A finished run is not replaced without asking.
    with pytest.raises(NightjarInputError, match="earlier nightjar run"):
        check_out_dir(out)


def test_an_unfinished_run_beside_the_users_own_file_still_asks(tmp_path: Path) -> None:
    out = tmp_path / "live"
    failed_live_run(out, "mine.txt")
    with pytest.raises(NightjarInputError, match="--force"):
        check_out_dir(out)
    prepare_out_dir(out, force=True, replace=True)
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "mine.txt"]


def test_a_sweep_that_failed_before_its_grid_reruns(tmp_path: Path, capsys: Any) -> None:
    trace = trace_file(tmp_path)
    out = tmp_path / "sweep"
    (out / "cells").mkdir(parents=True)
    (out / MARKER).write_text("written by nightjar; safe to overwrite with --out\n")
    assert cli(sweep_args(trace, out), capsys)[0] == 0
    assert (out / "sweep.json").is_file()
