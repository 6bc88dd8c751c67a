"""Runs API cases one after another in this process: ``api_worker.py CASES.json RESULTS.jsonl``.

Each case's code runs with ``nightjar`` and ``F`` (the fixture paths) in scope, under a
SIGALRM deadline (a blocked ``open`` of a FIFO is interrupted too). One JSON line is
written when a case starts and one when it ends, so the runner can tell a hang that
took this process down from a case that finished.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any


class Deadline(BaseException):
    """Raised by the alarm; a BaseException so that no ``except Exception`` hides it."""


def _alarm(signum: int, frame: Any) -> None:
    raise Deadline


def main() -> None:
    cases = json.loads(Path(sys.argv[1]).read_text())
    out = Path(sys.argv[2]).open("a", encoding="utf-8")  # noqa: SIM115 - open for the run
    fixtures = json.loads(Path(sys.argv[3]).read_text())
    import nightjar
    from nightjar.errors import NightjarInputError

    signal.signal(signal.SIGALRM, _alarm)
    for case in cases:
        out.write(json.dumps({"id": case["id"], "event": "start", "t": time.time()}) + "\n")
        out.flush()
        res: dict[str, Any] = {"id": case["id"], "event": "end"}
        started = time.monotonic()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            signal.setitimer(signal.ITIMER_REAL, case["timeout"])
            try:
                exec(case["code"], {"nightjar": nightjar, "F": fixtures})
                res["status"] = "ok"
            except Deadline:
                res["status"] = "hang"
            except NightjarInputError as exc:
                res.update(status="refused", message=str(exc), type=type(exc).__name__)
            except BaseException as exc:
                tb = traceback.extract_tb(exc.__traceback__)
                where = f"{tb[-1].filename}:{tb[-1].lineno}" if tb else "?"
                res.update(status="exception", type=type(exc).__name__,
                           message=str(exc)[:500], where=where)
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        res["warnings"] = [str(w.message)[:300] for w in caught]
        res["elapsed"] = time.monotonic() - started
        out.write(json.dumps(res) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
