"""The step log's reader, on a log the engine core is still writing."""

from __future__ import annotations

from pathlib import Path

from nightjar.live.steplog import StepLog, read_log


def test_a_torn_last_line_is_left_out(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    log = StepLog(str(path))
    log.write("request", request_id="nj0-a", drafted=3, accepted=2, preemptions=0)
    log.close()
    with path.open("a") as fh:
        fh.write('{"k')  # the engine core is mid-write
    contents = read_log(path)
    assert contents.requests == {"nj0-a": {"drafted": 3, "accepted": 2, "preemptions": 0}}


def test_idle_only_when_a_summary_follows_the_last_request(tmp_path: Path) -> None:
    path = tmp_path / "steps.jsonl"
    log = StepLog(str(path))
    assert not read_log(path).idle
    log.write("summary", switches=1)
    log.write("request", request_id="nj1-b", drafted=0, accepted=0, preemptions=0)
    assert not read_log(path).idle
    log.write("summary", switches=2)
    contents = read_log(path)
    assert contents.idle and contents.summary == {"switches": 2.0}
    log.close()
