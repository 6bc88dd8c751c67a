"""Run every hostile case against a nightjar source tree and tabulate what broke.

    python -m tools.hostile.run [--source DIR] [--only TEXT] [--jobs N] [--out FILE.json]

``--source`` is the tree whose ``nightjar`` package runs (default: this checkout), so the
same cases can be run against an older commit (``git archive COMMIT | tar -x -C DIR``).
Cases needing a mount point are run only as root. Every command runs in its own folder
under ``--root`` with a 40 s limit (sweeps 60 s); see tools/hostile/README.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tools.hostile.cases import Case, Fixtures, all_cases, fixtures_for_api

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
# What the table calls each finding, in the words.
CATEGORIES = {
    "traceback": "traceback (CLI)",
    "api-exception": "internal exception from the API instead of NightjarInputError",
    "hang": "hang",
    "late": "error only after the work ran, or exit 1 where exit 2 was promised",
    "accepted": "nonsense accepted silently (or a check of the output failed)",
    "debris": "interrupted run leaves debris",
    "unclear": "unclear message (not one line, or not naming the flag/file)",
    "refused-valid": "valid input refused",
    "no-warning": "suspect profile accepted without a warning",
}
WORK_MARKERS = ("tok/s", " computed, ", "live vs sim", "wrote ")


def _env(source: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONPATH=str(source), NO_COLOR="1", COLUMNS="200", TERM="dumb",
               PYTHONDONTWRITEBYTECODE="1", RAY_ADDRESS="")
    env.pop("RAY_ADDRESS")
    return env


# A case that reads /dev/zero into memory must not take the (shared) machine down: every
# command runs under this address-space limit, and running out is a finding like any other.
MEMORY_LIMIT = 4 * 2**30


def _limit() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))
    # A case's process starts as a terminal's would, with every signal's default
    # action: a runner started under nohup, or in the background of a script, passes
    # its ignored SIGHUP / SIGINT on, and the signal cases would then test nothing.
    for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)


def _cli(python: str, argv: list[str], source: Path, cwd: Path, timeout: float,
         sig: str | None = None, sig_after: float = 0.0) -> dict[str, Any]:
    cmd = [python, "-m", "nightjar.cli", *argv]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=cwd, env=_env(source), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                            start_new_session=True, text=True, errors="replace",
                            preexec_fn=_limit)
    if sig is not None:
        time.sleep(sig_after)
        number = getattr(signal, sig)
        if sig == "SIGINT":  # Ctrl-C: the terminal signals the whole process group
            os.killpg(proc.pid, number)
        else:  # kill, timeout, a container stop: the process alone
            proc.send_signal(number)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        rc = None
    return {"rc": rc, "stdout": out[-4000:], "stderr": err[-4000:],
            "elapsed": time.monotonic() - started}


def run_cli_case(case: Case, python: str, source: Path, root: Path) -> dict[str, Any]:
    cwd = root / "cwd" / case.id.replace("/", "__")
    cwd.mkdir(parents=True, exist_ok=True)
    for argv in case.before:
        _cli(python, argv, source, cwd, 120)
    assert case.argv is not None
    res = _cli(python, case.argv, source, cwd, case.timeout, case.signal, case.signal_after)
    rc = res["rc"]
    if rc is None:
        res["status"] = "hang"
    elif rc == 0:
        res["status"] = "ok"
    elif rc == 2 and "Traceback" not in res["stderr"]:
        res["status"] = "refused"
        # Notes and warnings may come first, each on its own line; the error is one line.
        errors = [ln for ln in res["stderr"].splitlines()
                  if not ln.startswith(("nightjar: warning:", "note:"))]
        res["message"] = "\n".join(errors).strip()
    else:
        res["status"] = "failed"
    res["debris"] = any(".nightjar-tmp-" in p.name for p in cwd.rglob(".*"))
    return res


def run_api_cases(cases: list[Case], python: str, source: Path, root: Path,
                  fixtures: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Every API case in as few worker processes as hangs allow."""
    results: dict[str, dict[str, Any]] = {}
    todo = list(cases)
    fix = root / "api-fixtures.json"
    fix.write_text(json.dumps(fixtures))
    while todo:
        for case in todo:  # the `before` commands of API cases (e.g. an earlier run)
            for argv in case.before:
                _cli(python, argv, source, root, 120)
            case.before = []
        spec = root / "api-cases.json"
        spec.write_text(json.dumps([{"id": c.id, "code": c.code, "timeout": c.timeout}
                                    for c in todo]))
        log = root / "api-results.jsonl"
        log.unlink(missing_ok=True)
        proc = subprocess.Popen([python, str(HERE / "api_worker.py"), str(spec), str(log),
                                 str(fix)], cwd=root, env=_env(source),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True, preexec_fn=_limit)
        current: str | None = None
        since = time.monotonic()
        while True:
            time.sleep(0.2)
            lines = log.read_text().splitlines() if log.exists() else []
            started = [json.loads(x) for x in lines]
            for rec in started:
                if rec["event"] == "end":
                    results[rec["id"]] = rec
            last = started[-1] if started else None
            if last is not None and last["event"] == "start" and last["id"] != current:
                current, since = last["id"], time.monotonic()
            if proc.poll() is not None:
                break
            limit = next((c.timeout for c in todo if c.id == current), 40.0) + 10
            if current is not None and current not in results and \
                    time.monotonic() - since > limit:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
        if current is not None and current not in results:
            err = proc.stderr.read().decode(errors="replace")[-500:] if proc.stderr else ""
            results[current] = {"id": current, "status": "hang" if proc.returncode in (
                -9, None) else "exception", "type": "worker died", "message": err}
        todo = [c for c in todo if c.id not in results]
        if proc.returncode not in (0, -9) and not started:
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            raise SystemExit(f"the API worker cannot start: {err[-2000:]}")
    return results


def classify(case: Case, res: dict[str, Any]) -> str:
    """``pass`` or the finding's category."""
    status = res["status"]
    if status == "hang":
        return "hang"
    if case.code is not None:
        if status == "exception" and res.get("type") not in case.raises:
            return "api-exception"
        if status == "exception":
            status = res["status"] = "refused"  # the exception Python's own protocol owes
    elif status == "failed":
        if case.expect == "interrupted" and "Traceback" not in res["stderr"]:
            pass
        elif "Traceback" in res["stderr"] or res["rc"] not in (1,):
            return "traceback"
        else:
            return "late"
    if case.check is not None:
        found = case.check(case, res)
        if found:
            return found
    if res.get("debris"):
        return "debris"
    message = res.get("message", "")
    if case.expect == "interrupted":
        return "accepted" if status == "ok" else "pass"
    if case.expect == "refuse":
        if status == "ok":
            return "accepted"
        if status == "failed":
            return "late"
    if case.expect in ("ok", "warn") and status == "refused":
        return "refused-valid"
    if status == "refused":
        if case.code is None and any(m in res.get("stdout", "") for m in WORK_MARKERS):
            return "late"
        lines = message.splitlines()
        if len(lines) != 1 or len(message) > 2100:
            return "unclear"
        if case.mention and case.mention.lower() not in message.lower():
            return "unclear"
    if case.expect == "warn" and status == "ok":
        said = " ".join(res.get("warnings", [])) + res.get("stderr", "") + res.get("stdout", "")
        if "warning" not in said.lower():
            return "no-warning"
    return "pass"


def _can_mount(root: Path) -> bool:
    """Whether this process may mount a tmpfs (root, and a container that allows it)."""
    if os.geteuid() != 0:
        return False
    probe = root / "mount-probe"
    probe.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "none", str(probe)],
                          capture_output=True, check=False)
    mounted = done.returncode == 0 and any(
        line.split()[1] == str(probe) for line in Path("/proc/mounts").read_text().splitlines())
    _unmount(root)
    return mounted


def _unmount(root: Path) -> None:
    mounts = Path("/proc/mounts").read_text().splitlines()
    for line in mounts:
        target = line.split()[1]
        if target.startswith(str(root)):
            subprocess.run(["umount", "-l", target], check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=REPO)
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--root", type=Path, default=None)
    ap.add_argument("--only", action="append", default=[],
                    help="run the cases whose id contains this text (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None, help="write every result here (JSON)")
    args = ap.parse_args()
    root = args.root or Path(tempfile.mkdtemp(prefix="nightjar-hostile-"))
    if root.exists():
        _unmount(root)
        shutil.rmtree(root)
    root.mkdir(parents=True)
    # Probed before the cases mount their own folders (the probe unmounts under root).
    can_mount = _can_mount(root)
    f = Fixtures(root, args.source.resolve())
    try:
        setup = _cli(args.python, ["sim", "--quiet", "--no-report", "--no-oracle", "--trace",
                                   str(f.trace), "--policy", "nospec", "--policy", "fixed:1",
                                   "--out", str(f.run)], args.source, root, 120)
        if setup["rc"] != 0:
            raise SystemExit(f"setup run failed: {setup['stderr'][-2000:]}")
        fx_api = fixtures_for_api(f)
        (root / "traces").mkdir(exist_ok=True)
        cases = all_cases(f)
        if not can_mount:
            print("mount-point cases left out: this process may not mount a tmpfs")
            cases = [c for c in cases if "mount" not in c.id]
        if args.only:
            cases = [c for c in cases if any(o in c.id for o in args.only)]
        results: dict[str, dict[str, Any]] = {}
        api = [c for c in cases if c.code is not None]
        cli = [c for c in cases if c.code is None]
        started = time.monotonic()
        with ThreadPoolExecutor(max(1, args.jobs)) as pool:
            api_future = pool.submit(run_api_cases, api, args.python, args.source, root, fx_api)
            futures = {c.id: pool.submit(run_cli_case, c, args.python, args.source, root)
                       for c in cli}
            for cid, fut in futures.items():
                results[cid] = fut.result()
            results.update(api_future.result())
        by_id = {c.id: c for c in cases}
        verdicts = {cid: classify(by_id[cid], res) for cid, res in results.items()}
    finally:
        _unmount(root)
    counts = collections.Counter(verdicts.values())
    total = len(verdicts)
    print(f"{total} cases in {time.monotonic() - started:.0f} s: {counts['pass']} as promised")
    print("| category | cases |\n|---|---|")
    for key, label in CATEGORIES.items():
        print(f"| {label} | {counts.get(key, 0)} |")
    for cid in sorted(verdicts):
        if verdicts[cid] != "pass":
            res = results[cid]
            detail = res.get("message") or res.get("stderr", "")[-300:] or res.get("type", "")
            detail = " ".join(str(detail).split())[:220]
            print(f"  {verdicts[cid]:14} {cid}: {res.get('type', '') or ''} {detail}")
    if args.out:
        args.out.write_text(json.dumps(
            {"verdicts": verdicts, "results": {k: {x: y for x, y in v.items()}
                                               for k, v in results.items()},
             "expect": {c.id: c.expect for c in cases}}, indent=1, default=str))
    # A case that broke its promise fails the run: scripts/test.sh runs the suite in CI.
    return 0 if counts["pass"] == total else 1


if __name__ == "__main__":
    sys.exit(main())
