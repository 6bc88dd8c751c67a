"""Traces at real scale: parquet traces, chunked imports that keep to a window in bounded
memory and match the row-by-row reader, Vidur's length-only files, --rate-scale with one
meaning, and the context-window check."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nightjar.cli import main
from nightjar.errors import NightjarInputError
from nightjar.trace import fast_csv
from nightjar.trace.importers import _azure_fast, _azure_rows, import_azure_csv
from nightjar.trace.tool_formats import (
    _burstgpt_fast,
    _burstgpt_rows,
    _vidur_fast,
    _vidur_rows,
    import_vidur_csv,
)
from nightjar.trace.trace import load_trace

pytest.importorskip("pyarrow")


def test_a_parquet_trace_loads_back_equal_and_runs(tmp_path: Path) -> None:
    trace = load_trace("longctx-mix")
    path = tmp_path / "mix.parquet"
    old = os.umask(0o022)
    try:
        assert main(["trace", "export", "longctx-mix", "--format", "parquet", "--out",
                     str(path)]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # as documented, not mkstemp's 0600
    back = load_trace(str(path))
    np.testing.assert_array_equal(back.arrival_s, trace.arrival_s)  # exact, no rounding
    np.testing.assert_array_equal(back.prompt_tokens, trace.prompt_tokens)
    np.testing.assert_array_equal(back.workload, trace.workload)
    assert (back.name, back.duration_s) == (trace.name, trace.duration_s)
    assert path.stat().st_size < 20 * len(trace)  # a few bytes a request, not ~100
    out = tmp_path / "run"
    assert main(["sim", "--trace", str(path), "--profile", "h100-80gb/llama-3.1-8b+llama-3.2-1b",
                 "--policy", "fixed:1", "--no-oracle", "--out", str(out), "--quiet",
                 "--no-report"]) == 0


def test_a_bad_parquet_trace_is_one_line(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"arrival_s": [0.0, 1.0], "prompt_tokens": [5, 0],
                             "output_tokens": [3, 3]}), path)
    with pytest.raises(NightjarInputError, match=r"row 1: prompt_tokens must be in 1\.\."):
        load_trace(str(path))
    pq.write_table(pa.table({"arrival_s": [0.0], "prompt_tokens": [5]}), path)
    with pytest.raises(NightjarInputError, match="missing column"):
        load_trace(str(path))


def test_gen_writes_parquet_and_max_requests_cuts_a_generative_trace(tmp_path: Path) -> None:
    spec = {"format_version": 1, "name": "t", "seed": 3, "max_requests": 50,
            "segments": [{"duration_s": 60, "rate_rps": 5}]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(spec))
    trace = load_trace(str(path))
    del spec["max_requests"]
    (tmp_path / "full.json").write_text(json.dumps(spec))
    full = load_trace(str(tmp_path / "full.json"))
    assert len(trace) == 50 < len(full)
    np.testing.assert_array_equal(trace.arrival_s, full.arrival_s[:50])
    assert trace.duration_s == trace.arrival_s[-1]  # ends at its last kept arrival
    assert main(["trace", "gen", "--rate", "5", "--duration", "10", "--format", "parquet",
                 "--out", str(tmp_path / "g.parquet")]) == 0
    assert len(load_trace(str(tmp_path / "g.parquet"))) > 10


# -- the chunked readers agree with the row-by-row ones --------------------------------

def _azure_text(rows: list[tuple[str, int, int]]) -> str:
    return "TIMESTAMP,ContextTokens,GeneratedTokens\n" + "".join(
        f"{t},{c},{g}\n" for t, c, g in rows)


@st.composite
def azure_rows(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    n = draw(st.integers(1, 40))
    gaps = draw(st.lists(st.floats(0, 5), min_size=n, max_size=n))
    t = np.cumsum(gaps)
    dated = draw(st.booleans())
    rows = []
    for k in range(n):
        kind = draw(st.sampled_from(["ok"] * 6 + ["nan", "inf"]))
        if kind != "ok":
            stamp = kind
        elif dated:
            stamp = str(np.datetime64("2023-11-16T18:00:00") + np.timedelta64(int(t[k] * 1e6),
                                                                              "us"))
            stamp = stamp.replace("T", " ")
        else:
            stamp = f"{t[k]:.6f}"
        rows.append((stamp, draw(st.integers(0, 3)), draw(st.integers(0, 3))))
    return rows


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=azure_rows(), start=st.floats(0, 20),
       duration=st.one_of(st.none(), st.floats(1, 60)),
       limit=st.one_of(st.none(), st.integers(1, 10)), chunk=st.integers(1, 7))
def test_azure_chunks_match_rows(tmp_path: Path, rows: list[tuple[str, int, int]], start: float,
                                 duration: float | None, limit: int | None, chunk: int) -> None:
    path = tmp_path / "a.csv"
    path.write_text(_azure_text(rows))
    fast_csv.CHUNK_ROWS, old = chunk, fast_csv.CHUNK_ROWS
    try:
        fast = _azure_fast(path, start, duration, limit)
    except fast_csv.SlowPath:  # e.g. a window with no finite row: the reference decides
        return
    finally:
        fast_csv.CHUNK_ROWS = old
    slow = _azure_rows(path, start, duration, limit)
    np.testing.assert_allclose(fast[0], slow[0], atol=1e-6)
    assert fast[1:] == slow[1:]


def test_burstgpt_and_vidur_chunks_match_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    n = 500
    t = np.cumsum(rng.exponential(0.5, n))
    models = rng.choice(["ChatGPT", "GPT-4"], n)
    req, resp = rng.integers(0, 50, n), rng.integers(0, 50, n)
    bg = tmp_path / "bg.csv"
    head = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
    bg.write_text(head + "".join(
        f"{a:.3f},{m},{b},{c},{b + c},Conversation log\n"
        for a, m, b, c in zip(t, models, req, resp, strict=True)))
    vi = tmp_path / "vi.csv"
    vi.write_text("arrived_at,num_prefill_tokens,num_decode_tokens,num_total_tokens\n" + "".join(
        f"{a:.6f},{b},{c},{b + c}\n" for a, b, c in zip(t, req, resp, strict=True)))
    fast_csv.CHUNK_ROWS, old = 37, fast_csv.CHUNK_ROWS
    try:
        for args in ((10.0, 100.0, "GPT-4", None), (0.0, None, None, 40), (5.0, 50.0, None, 7)):
            assert _burstgpt_fast(bg, *args) == _burstgpt_rows(bg, *args)
        for limit in (None, 3, 120):
            columns = ("arrived_at", "num_prefill_tokens", "num_decode_tokens")
            fast, slow = _vidur_fast(vi, columns, limit), _vidur_rows(vi, columns, limit)
            np.testing.assert_allclose(fast[0], slow[0])
            assert fast[1:] == slow[1:]
    finally:
        fast_csv.CHUNK_ROWS = old


def test_a_bad_row_deep_in_a_big_file_is_named_by_line(tmp_path: Path) -> None:
    lines = [f"{k * 0.1:.1f},10,20" for k in range(1000)]
    lines[876] = "87.6,ten,20"
    path = tmp_path / "a.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n" + "\n".join(lines) + "\n")
    with pytest.raises(NightjarInputError, match=r"line 878: ContextTokens 'ten'"):
        import_azure_csv(path)


# -- Vidur length-only, --rate-scale ----------------------------------------------------

def test_vidur_length_only_gets_generated_arrivals(tmp_path: Path) -> None:
    path = tmp_path / "lengths.csv"
    path.write_text("num_prefill_tokens,num_decode_tokens,num_total_tokens\n"
                    + "".join(f"{100 + k},{20 + k},{120 + 2 * k}\n" for k in range(200)))
    trace, rep = import_vidur_csv(path, rate_rps=4.0, burstiness=0.5, seed=2)
    assert rep.kept == 200 and trace.arrival_s[0] == 0.0
    rate = (len(trace) - 1) / trace.arrival_s[-1]
    assert 2.5 < rate < 6.5
    everything_at_once, _ = import_vidur_csv(path)  # inf: all at time 0, as ShareGPT
    assert (everything_at_once.arrival_s == 0).all()
    out = tmp_path / "t.parquet"
    assert main(["trace", "import", "vidur", str(path), "--rate", "4", "--burstiness", "0.5",
                 "--seed", "2", "--format", "parquet", "--out", str(out)]) == 0
    np.testing.assert_allclose(load_trace(str(out)).arrival_s, trace.arrival_s)


def test_rate_scale_means_the_same_everywhere(tmp_path: Path) -> None:
    import nightjar
    from nightjar.sweep.spec import build_spec

    csv = tmp_path / "v.csv"
    assert main(["trace", "export", "steady_low", "--out", str(csv)]) == 0
    assert main(["trace", "import", "vidur", str(csv), "--rate-scale", "2", "--out",
                 str(tmp_path / "x2.json")]) == 0
    base, fast = load_trace("steady_low"), load_trace(str(tmp_path / "x2.json"))
    np.testing.assert_allclose(fast.arrival_s, np.round(base.arrival_s, 6) / 2, atol=1e-6)
    sim = nightjar.simulate("steady_low", policies="fixed:2", rate_scale=2.0, oracle=False)
    from nightjar.sweep.cell import run_cell
    from nightjar.sweep.run import plan

    task = plan(build_spec({"trace": ["steady_low"], "policy": ["fixed:2"],
                            "rate_scale": [2.0]}))[0]
    row = run_cell(task)
    assert row["throughput_tok_s"] == pytest.approx(
        nightjar.results_frame(sim)["throughput_tok_s"][0], rel=1e-12)
    out = tmp_path / "run"
    assert main(["sim", "--trace", "steady_low", "--policy", "fixed:2", "--rate-scale", "2",
                 "--no-oracle", "--out", str(out), "--quiet", "--no-report"]) == 0
    back = nightjar.results_frame(nightjar.load_run(out))
    assert back["throughput_tok_s"][0] == pytest.approx(row["throughput_tok_s"], rel=1e-12)
    with pytest.raises(NightjarInputError, match="rate_scale must be > 0"):
        nightjar.simulate("steady_low", policies="nospec", rate_scale=0.0)


def test_a_request_longer_than_the_context_window_is_refused_or_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["sim", "--trace", "longctx-rag", "--profile",
            "a100-80gb-paper/vicuna-13b+vicuna-68m", "--policy", "nospec", "--no-oracle",
            "--quiet", "--no-report"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert "longer than profile a100-80gb-paper/vicuna-13b+vicuna-68m's max_model_len 2048" in err
    assert "--on-unfit skip" in err and not (tmp_path / "a").exists()
    assert main([*args, "--on-unfit", "skip", "--max-model-len", "1000000",
                 "--out", str(tmp_path / "b")]) == 0


# -- bounded memory ---------------------------------------------------------------------

ROWS = 3_000_000


def _peak_rss_kib(cmd: list[str]) -> int:
    """Peak RSS of ``cmd``, measured by a fresh wrapper so no other child counts."""
    probe = textwrap.dedent(f"""
        import resource, subprocess, sys
        done = subprocess.run({cmd!r}, capture_output=True, text=True)
        if done.returncode:
            sys.exit(done.stdout + done.stderr)
        print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    """)
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    return int(done.stdout.strip())


def _write_azure(path: Path, rows: int) -> None:
    """An Azure-format file of ``rows`` requests at ~20 req/s, written in blocks."""
    rng = np.random.default_rng(5)
    t0 = np.datetime64("2023-11-16T00:00:00.000000")
    done = 0.0
    with path.open("w") as f:
        f.write("TIMESTAMP,ContextTokens,GeneratedTokens\n")
        for lo in range(0, rows, 500_000):
            n = min(500_000, rows - lo)
            t = done + np.cumsum(rng.exponential(0.05, n))
            done = float(t[-1])
            stamps = np.datetime_as_string(t0 + (t * 1e6).astype("timedelta64[us]"), unit="us")
            ctx = rng.integers(1, 4000, n).astype(str)
            gen = rng.integers(1, 600, n).astype(str)
            block = np.char.add(np.char.add(np.char.add(np.char.replace(stamps, "T", " "), ","),
                                            np.char.add(ctx, ",")), gen)
            f.write("\n".join(block.tolist()) + "\n")


@pytest.mark.slow
def test_a_window_of_a_multi_million_row_file_imports_in_bounded_memory(tmp_path: Path) -> None:
    big, small = tmp_path / "week.csv", tmp_path / "day.csv"
    _write_azure(big, ROWS)
    _write_azure(small, 2000)
    nj = str(Path(sys.executable).with_name("nightjar"))

    def cmd(src: Path, out: str, *window: str) -> list[str]:
        return [nj, "trace", "import", "azure", str(src), *window, "--format", "parquet",
                "--out", str(tmp_path / out)]

    baseline = _peak_rss_kib(cmd(small, "day.parquet"))
    peak = _peak_rss_kib(cmd(big, "hour.parquet", "--start", "60000", "--duration", "3600"))
    trace = load_trace(str(tmp_path / "hour.parquet"))
    assert 3600 * 15 < len(trace) < 3600 * 25  # the hour at ~20 req/s, re-based to 0
    assert trace.arrival_s[0] < 1 and trace.arrival_s[-1] < 3600
    # Reading the whole file would hold at least its bytes (~100 MB as text, several
    # times that as a frame); the chunked reader holds one chunk and the hour's rows
    # (measured: ~40 MB over the baseline).
    size_kib = big.stat().st_size // 1024
    assert peak - baseline < size_kib * 3 // 4, (peak, baseline, size_kib)
