"""Issue 24: property-based tests of every input surface, over what broke in the hostile
round (tools/hostile). For any generated input the product returns a result or raises a
one-line NightjarInputError before doing any work; nothing blocks, and nothing written
mixes two runs. Bounded: a fixed number of examples each, ~1 minute in all.

- every file argument, given every kind of file (FIFO, device, directory, symlinks of
  every sort, empty, binary, non-UTF-8, BOM, CRLF);
- output folders and files, given every kind of target (symlinks, dangling links,
  FIFOs, devices, files, non-empty folders, earlier runs with --force);
- profiles with extreme, zero and self-contradicting cells, run by every planning policy;
- the Python API's every parameter, given values of every type;
- the importers, given BOMs, CRLF, huge numbers and lone surrogates;
- sweep grids: a grid that passes the up-front check runs every cell.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import nightjar
from nightjar.errors import NightjarInputError
from nightjar.profile.profile import Profile, load_profile
from nightjar.results.outdir import MARKER, check_out_file, staged_out_dir, write_out_file
from tests.hang import fails_after

A100 = "a100-80gb/vicuna-13b+vicuna-68m"
FUZZ = settings(max_examples=120, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.function_scoped_fixture])
TRACE = {"requests": [{"arrival_s": 0.0, "prompt_tokens": 40, "output_tokens": 5},
                      {"arrival_s": 0.2, "prompt_tokens": 30, "output_tokens": 3}]}


def one_line(exc: NightjarInputError) -> str:
    text = str(exc)
    assert text and "\n" not in text and "\r" not in text and len(text) <= 2000, text
    return text


# -- every file argument, every kind of file ---------------------------------------------

GPU = {"name": "h20", "bf16_tflops": 148, "memory_bandwidth_gb_s": 4000, "memory_gib": 95.6,
       "host_link_gb_s": 50}
MODEL = {"hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 8,
         "intermediate_size": 1024, "vocab_size": 32000}
AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.68,374,44\n" \
        "2023-11-16 18:15:50.99,396,109\n"
VIDUR = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,40,6\n0.5,30,4\n"
BURST = "Timestamp,Model,Request tokens,Response tokens\n5,ChatGPT,472,18\n45,GPT-4,87,20\n"
SHAREGPT = [{"conversations": [{"from": "human", "value": "hi there"},
                               {"from": "gpt", "value": "hello"}]}]


def _readers() -> dict[str, tuple[str, str, Callable[[Path], Any]]]:
    """name -> (extension, valid text, how the product reads such a file)."""
    from nightjar.roofline.gpu_spec import parse_gpu_spec
    from nightjar.roofline.model_config import load_model_config
    from nightjar.sweep.spec import read_config
    from nightjar.trace.importers import import_azure_csv, import_sharegpt
    from nightjar.trace.tool_formats import (
        import_burstgpt_csv,
        import_vidur_csv,
        import_vllm_jsonl,
    )

    profile = json.dumps(load_profile(A100).to_json())
    return {
        "trace": (".json", json.dumps(TRACE), lambda p: nightjar.load_trace(p)),
        "profile": (".json", profile, lambda p: nightjar.load_profile(p)),
        "sweep-config": (".toml", 'policy = ["nospec"]\n', read_config),
        "gpu-spec": (".json", json.dumps(GPU), lambda p: parse_gpu_spec(str(p))),
        "model-config": (".json", json.dumps(MODEL), lambda p: load_model_config(str(p))),
        "azure": (".csv", AZURE, import_azure_csv),
        "vidur": (".csv", VIDUR, import_vidur_csv),
        "burstgpt": (".csv", BURST, import_burstgpt_csv),
        "sharegpt": (".json", json.dumps(SHAREGPT),
                     lambda p: import_sharegpt(p, rate_rps=math.inf)),
        "vllm": (".jsonl", '{"prompt": "hi"}\n', lambda p: import_vllm_jsonl(p, rate_rps=1.0)),
    }


READERS = _readers()
BROKEN = ["missing", "directory", "fifo", "devnull", "devzero", "symlink-fifo", "dangling",
          "loop", "empty", "binary", "latin1", "nul", "deep", "hugeint"]
VALID = ["plain", "bom", "crlf", "bom-crlf", "symlink", "odd-name"]


def _make(root: Path, ext: str, text: str, kind: str) -> Path:
    path = root / f"{kind}{ext}"
    if kind == "odd-name":
        path = root / f"a b\u00e9;$(x){ext}"
    if kind == "missing":
        return path
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "devnull":
        return Path("/dev/null")
    elif kind == "devzero":
        return Path("/dev/zero")
    elif kind == "symlink-fifo":
        os.mkfifo(root / "pipe")
        path.symlink_to(root / "pipe")
    elif kind == "dangling":
        path.symlink_to(root / "nowhere")
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "symlink":
        (root / f"real{ext}").write_text(text)
        path.symlink_to(root / f"real{ext}")
    elif kind in ("bom", "crlf", "bom-crlf"):
        body = text.replace("\n", "\r\n") if "crlf" in kind else text
        path.write_bytes((b"\xef\xbb\xbf" if "bom" in kind else b"") + body.encode())
    else:
        data = {"empty": b"", "binary": bytes(range(256)) * 8,
                "latin1": text.encode() + b"\xe9\xff", "nul": text.encode() + b"\x00",
                "deep": b"[" * 100000 + b"]" * 100000, "hugeint": b"1" + b"0" * 5000
                }.get(kind, text.encode())
        path.write_bytes(data)
    return path


@FUZZ
@given(st.sampled_from(sorted(READERS)), st.sampled_from(BROKEN + VALID))
def test_every_file_argument_reads_or_refuses_at_once(reader: str, kind: str) -> None:
    ext, text, read = READERS[reader]
    with tempfile.TemporaryDirectory() as d:
        path = _make(Path(d), ext, text, kind)
        with fails_after(10):  # a FIFO or /dev/zero must never block or fill memory
            try:
                read(path)
            except NightjarInputError as exc:
                assert kind in BROKEN, (reader, kind, str(exc))
                one_line(exc)
                return
        assert kind in VALID or (kind == "empty" and reader == "sweep-config"), (reader, kind)


# -- output targets ----------------------------------------------------------------------

OUT_KINDS = ["new", "nested", "empty-dir", "file", "symlink-dir", "symlink-file", "dangling",
             "loop", "fifo", "devnull", "parent-is-file", "nonempty", "earlier-run",
             "too-long"]


def _target(root: Path, kind: str) -> tuple[Path, Path | None]:
    """(--out, the folder the run must land in, or None where it must be refused)."""
    out = root / "o"
    if kind == "new":
        return out, out
    if kind == "nested":
        return root / "a" / "b", root / "a" / "b"
    if kind in ("empty-dir", "nonempty", "earlier-run"):
        out.mkdir()
        if kind == "nonempty":
            (out / "mine.txt").write_text("mine")
        if kind == "earlier-run":
            (out / MARKER).write_text("written by nightjar\n")
            (out / "summary.csv").write_text("slug\nold\n")
            (out / "old").mkdir()
            (out / "old" / "summary.json").write_text("{}")
            (out / "mine.txt").write_text("mine")
        return out, out
    if kind == "file":
        out.write_text("mine")
    elif kind == "symlink-dir":
        (root / "real").mkdir()
        out.symlink_to(root / "real")
        return out, root / "real"
    elif kind == "symlink-file":
        (root / "real.txt").write_text("mine")
        out.symlink_to(root / "real.txt")
    elif kind == "dangling":
        out.symlink_to(root / "nowhere")
    elif kind == "loop":
        out.symlink_to(out)
    elif kind == "fifo":
        os.mkfifo(out)
    elif kind == "devnull":
        return Path("/dev/null"), None
    elif kind == "parent-is-file":
        (root / "plain").write_text("mine")
        return root / "plain" / "o", None
    elif kind == "too-long":
        return root / ("x" * 300), None
    return out, None


@FUZZ
@given(st.sampled_from(OUT_KINDS), st.booleans(), st.booleans())
def test_an_output_folder_is_checked_first_and_holds_only_the_new_run(
    kind: str, force: bool, fail: bool
) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        out, lands = _target(root, kind)
        before = sorted(p.name for p in root.rglob("*"))
        worked = False
        try:
            with staged_out_dir(out, force) as tmp:
                worked = True
                (tmp / "new").mkdir()
                (tmp / "new" / "summary.json").write_text("{}")
                (tmp / "summary.csv").write_text("slug\nnew\n")
                if fail:
                    raise RuntimeError("the run failed")
        except NightjarInputError as exc:
            one_line(exc)
            assert not worked, "refused after the work"
            assert sorted(p.name for p in root.rglob("*")) == before  # nothing made
            assert lands is None or (kind in ("nonempty", "earlier-run") and not force)
            return
        except RuntimeError:
            assert fail
        assert lands is not None, (kind, force)
        leftovers = [p for p in root.rglob("*") if "nightjar-tmp" in p.name
                     or "nightjar-old" in p.name]
        assert leftovers == []
        if fail:
            return
        names = sorted(p.name for p in lands.iterdir())
        assert "new" in names and "old" not in names, names  # never two runs mixed
        if kind in ("nonempty", "earlier-run"):
            assert (lands / "mine.txt").read_text() == "mine"  # the user's file stays


@FUZZ
@given(st.sampled_from(OUT_KINDS), st.booleans())
def test_an_output_file_is_checked_first(kind: str, force: bool) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        out, _ = _target(root, kind)
        if kind in ("empty-dir", "nonempty", "earlier-run", "symlink-dir"):
            expect_ok = False  # a folder is no file
        else:
            expect_ok = kind in ("new", "nested") or (kind in ("file", "symlink-file") and force)
        try:
            real = check_out_file(out, force, inputs=[root / "input.json"])
        except NightjarInputError as exc:
            one_line(exc)
            assert not expect_ok, (kind, force, str(exc))
            return
        assert expect_ok, (kind, force)
        with fails_after(10):
            write_out_file(real, "{}\n", out)
        assert real.read_text() == "{}\n"


def test_an_output_file_is_never_an_input(tmp_path: Path) -> None:
    src = tmp_path / "in.csv"
    src.write_text(VIDUR)
    for given_path in (src, tmp_path / "." / "in.csv"):
        with pytest.raises(NightjarInputError, match="is the input"):
            check_out_file(given_path, True, inputs=[src])


# -- profiles with extreme and zero cells ------------------------------------------------

BASE = load_profile(A100).to_json()
CELL_VALUES = st.sampled_from([0.0, 1e-300, 1e-9, 5e-4, 1e-3, 0.01, 1.0, 30.0, 1e6, 3.6e6,
                               1e7, 1e300, -1.0, -0.0])
SCALES = st.sampled_from([0.0, 0.1, 0.5, 0.9, 0.97, 1.0, 1.5, 1e3])


@settings(max_examples=100, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(BASE["decode"]) - 1), st.integers(3, 5),
                          st.one_of(CELL_VALUES, SCALES.map(lambda s: ("scale", s)))),
                max_size=4),
       st.sampled_from(["calibrated-roofline", "measured"]))
def test_a_profile_with_odd_cells_loads_and_runs_or_is_one_line(
    edits: list[tuple[int, int, Any]], source: str
) -> None:
    data = json.loads(json.dumps(BASE))
    data["source"] = source
    for row, col, value in edits:
        cell = data["decode"][row]
        cell[col] = cell[col] * value[1] if isinstance(value, tuple) else value
    try:
        profile = Profile.from_json(data, "fuzz.json")
    except NightjarInputError as exc:
        one_line(exc)
        return
    for row in data["decode"]:
        assert row[3] > 0 and row[5] > 0 and row[3] + 1e-4 >= max(row[4], row[5]), row
    trace = nightjar.Trace.from_requests(TRACE["requests"])
    # Every planning policy and the oracle divide by step times: none may fail.
    with fails_after(60):
        try:
            nightjar.simulate(trace, profile, ["nightjar+", "dsd", "tetris", "banditspec"],
                              seed=1)
        except NightjarInputError as exc:
            one_line(exc)


# -- the Python API's every parameter ----------------------------------------------------

ODD = [None, True, False, 0, 1, -1, 3, 3.0, 2**64, math.nan, math.inf, "", "x", "off", "on",
       "no", "1", b"x", [], ["nospec"], [None], {}, np.int64(2), np.float64(0.5),
       np.bool_(True), (1, 2)]
GOOD = {"seed": [0, 7, np.int64(3)], "gamma_max": [1, 3, 4], "prior": ["exact", "scale:1.2"],
        "draft_kv": ["sync", "skip"], "acceptance": ["geometric", "positional"],
        "offload": [False, True, np.bool_(False)], "reload": ["drain"], "engine": ["v1", "v0"],
        "max_num_seqs": [8, 256], "max_num_batched_tokens": [512, 8192],
        "max_model_len": [None, 4096], "on_unfit": ["refuse", "skip"],
        "oracle": [True, False], "slo_ttft": [1.0, 2], "slo_tpot": [0.1]}


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(sorted(GOOD)),
                       st.one_of(st.sampled_from(ODD), st.just("good")), max_size=3),
       st.data())
def test_every_api_parameter_is_checked(kwargs: dict[str, Any], data: Any) -> None:
    args = {k: (data.draw(st.sampled_from(GOOD[k])) if v == "good" else v)
            for k, v in kwargs.items()}
    trace = nightjar.Trace.from_requests(TRACE["requests"])
    try:
        with fails_after(60):
            results = nightjar.simulate(trace, None, ["nospec", "fixed:1"], **args)
    except NightjarInputError as exc:
        one_line(exc)
        return
    for key, value in args.items():  # nothing odd got through
        assert not isinstance(value, str | bytes) or key not in ("offload", "oracle"), args
        if key in ("offload", "oracle"):
            assert isinstance(value, bool | np.bool_), args
    frame = nightjar.results_frame(results)
    assert len(frame) >= 2


@FUZZ
@given(st.sampled_from(["results_frame", "load_run", "load_sweep", "sweep_figures",
                        "load_trace", "load_profile", "simulate", "from_segments",
                        "from_requests", "Results"]), st.sampled_from(ODD))
def test_every_api_function_refuses_junk_in_one_line(name: str, value: Any) -> None:
    call: dict[str, Callable[[Any], Any]] = {
        "results_frame": nightjar.results_frame, "load_run": nightjar.load_run,
        "load_sweep": nightjar.load_sweep, "sweep_figures": nightjar.sweep_figures,
        "load_trace": nightjar.load_trace, "load_profile": nightjar.load_profile,
        "simulate": nightjar.simulate, "from_segments": nightjar.Trace.from_segments,
        "from_requests": nightjar.Trace.from_requests, "Results": nightjar.Results,
    }
    with tempfile.TemporaryDirectory() as d, fails_after(30):
        cwd = os.getcwd()
        os.chdir(d)  # a junk string is looked up as a path: not in this checkout
        try:
            call[name](value)
        except NightjarInputError as exc:
            one_line(exc)
        finally:
            os.chdir(cwd)


# -- importers: BOM, CRLF, huge numbers, lone surrogates ---------------------------------

NUMBER = st.one_of(st.integers(0, 5000).map(str), st.sampled_from(
    ["1e400", "1e300", str(2**70), "nan", "inf", "-1", "0", "1.5", "", "x", "\u00b2"]))
EPOCH = st.sampled_from(["0", "5.5", "1700000000", "1700000000000", "2023-11-16 18:15:46.5"])


@FUZZ
@given(st.sampled_from(["azure", "vidur", "burstgpt"]), st.booleans(), st.booleans(),
       st.lists(st.tuples(EPOCH, NUMBER, NUMBER), min_size=1, max_size=5),
       st.sampled_from([b"", b"\xed\xa0\x80", b"\xff"]))
def test_csv_importers_take_bom_crlf_and_refuse_junk_in_one_line(
    kind: str, bom: bool, crlf: bool, rows: list[tuple[str, str, str]], junk: bytes
) -> None:
    from nightjar.trace.importers import import_azure_csv
    from nightjar.trace.tool_formats import import_burstgpt_csv, import_vidur_csv

    header, read = {
        "azure": ("TIMESTAMP,ContextTokens,GeneratedTokens", import_azure_csv),
        "vidur": ("arrived_at,num_prefill_tokens,num_decode_tokens", import_vidur_csv),
        "burstgpt": ("Timestamp,Request tokens,Response tokens", import_burstgpt_csv),
    }[kind]
    eol = "\r\n" if crlf else "\n"
    text = eol.join([header, *(",".join(r) for r in rows)]) + eol
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t.csv"
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode() + junk)
        try:
            trace, report = read(path)
        except NightjarInputError as exc:
            assert "missing column" not in one_line(exc)  # a BOM is never part of a name
            return
    assert not junk
    assert len(trace) == report.kept >= 1
    assert np.all(np.isfinite(trace.arrival_s)) and trace.arrival_s.max() <= 1e8


TEXT = st.text(alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\\"),
               max_size=20)


@FUZZ
@given(st.sampled_from(["sharegpt", "vllm"]), st.booleans(),
       st.lists(st.one_of(TEXT, st.sampled_from(["\\ud800", "x\\udfff", "\\ud83d\\ude00"])),
                min_size=1, max_size=4), st.sampled_from([None, 0, 5, 2**40, 10**30, -1, "x"]))
def test_json_importers_clean_lone_surrogates(
    kind: str, bom: bool, texts: list[str], output: Any
) -> None:
    from nightjar.trace.importers import import_sharegpt
    from nightjar.trace.tool_formats import import_vllm_jsonl

    def lit(t: str) -> str:  # a JSON string literal that keeps the escapes as written
        return '"' + json.dumps(t)[1:-1].replace("\\\\u", "\\u") + '"'

    if kind == "sharegpt":
        turn = '{{"conversations": [{{"from": "human", "value": {}}}, {{"from": "gpt", ' \
            '"value": "ok"}}]}}'
        body = "[" + ",".join(turn.format(lit(t + " q")) for t in texts) + "]"
    else:
        extra = "" if output is None else f', "output_tokens": {json.dumps(output)}'
        body = "\n".join('{{"prompt": {}{}}}'.format(lit(t + " q"), extra) for t in texts)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"t.{kind}"
        path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + body.encode())
        try:
            trace, _ = (import_sharegpt(path, rate_rps=math.inf) if kind == "sharegpt"
                        else import_vllm_jsonl(path, rate_rps=math.inf))
        except NightjarInputError as exc:
            one_line(exc)
            assert kind == "vllm" and output not in (None, 5, 2**40), (body, str(exc))
            return
    assert trace.prompts is not None
    for p in trace.prompts:
        assert isinstance(p, str)
        p.encode("utf-8")  # every stored prompt can be written as UTF-8


# -- sweeps: what passes the up-front check runs ------------------------------------------

GRID = st.fixed_dictionaries({}, optional={
    "policy": st.lists(st.sampled_from(["nospec", "fixed:1", "fixed:3", "dsd", "nightjar+"]),
                       min_size=1, max_size=2, unique=True),
    "rate_scale": st.lists(st.sampled_from([1e-300, 1e-9, 0.5, 1.0, 2.0, 1e300]), min_size=1,
                           max_size=2, unique=True),
    "max_model_len": st.lists(st.sampled_from([10, 40, 46, 4096]), min_size=1, max_size=1),
    "prior": st.lists(st.sampled_from(["exact", "none", "scale:2"]), min_size=1, max_size=1),
    "offload": st.lists(st.sampled_from(["off", "on"]), min_size=1, max_size=1),
    "gamma_max": st.lists(st.sampled_from([1, 3, 9]), min_size=1, max_size=1),
    "on_unfit": st.sampled_from(["refuse", "skip"]),
})


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(GRID)
def test_a_sweep_that_passes_the_up_front_check_runs_every_cell(grid: dict[str, Any]) -> None:
    from nightjar.sweep.run import run_sweep
    from nightjar.sweep.spec import build_spec

    with tempfile.TemporaryDirectory() as d:
        trace = Path(d) / "t.json"
        trace.write_text(json.dumps(TRACE))
        out = Path(d) / "out"
        try:
            spec = build_spec({**grid, "trace": [str(trace)]}, source="fuzz")
            outcome = run_sweep(spec, out, jobs=1, report=False)
        except NightjarInputError as exc:
            one_line(exc)
            assert not (out / "cells").exists() or not any((out / "cells").iterdir())
            return
    assert outcome.failed == [], outcome.failed  # every cell's inputs were checked first


def _mount(path: Path, options: str) -> bool:
    import subprocess

    if os.geteuid() != 0:
        return False
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"{options},size=1m", "none",
                           str(path)], capture_output=True, check=False)
    return done.returncode == 0


@pytest.mark.parametrize("options", ["rw", "ro"])
def test_a_mount_point_is_written_into_and_a_read_only_one_refused_first(
    tmp_path: Path, options: str
) -> None:
    # A container volume is an empty mount point: renaming a staged folder onto it fails
    # ("Device or resource busy"), so the run stages inside it; a read-only one is found
    # before any work. Needs root and mount (else skipped).
    import subprocess

    out = tmp_path / "volume"
    out.mkdir()
    if not _mount(out, options):
        pytest.skip("needs root and mount(8)")
    try:
        if options == "ro":
            with pytest.raises(NightjarInputError, match="Read-only file system"):
                check_out_file(out / "t.json")
            with pytest.raises(NightjarInputError, match="Read-only file system"), \
                    staged_out_dir(out):
                raise AssertionError("the work started")
            return
        with staged_out_dir(out) as tmp:
            (tmp / "summary.csv").write_text("slug\n")
        assert sorted(p.name for p in out.iterdir()) == [MARKER, "summary.csv"]
    finally:
        subprocess.run(["umount", "-l", str(out)], check=False)


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["jobs", "force", "report", "ray", "write-force", "write-report"]),
       st.sampled_from([v for v in ODD if not isinstance(v, str)]))
def test_the_sweep_and_write_switches_are_checked(name: str, value: Any) -> None:
    with tempfile.TemporaryDirectory() as d, fails_after(60):
        trace = Path(d) / "t.json"
        trace.write_text(json.dumps(TRACE))
        try:
            if name.startswith("write-"):
                results = nightjar.simulate(str(trace), None, "nospec", oracle=False)
                results.write(Path(d) / "w", **{name[6:]: value})
            else:
                nightjar.run_sweep(Path(d) / "s", trace=[str(trace)], policy=["nospec"],
                                   **{"report": False, name: value})
        except NightjarInputError as exc:
            one_line(exc)
            return
    if name in ("force", "report", "write-force", "write-report"):
        assert isinstance(value, bool | np.bool_), (name, value)
    if name == "jobs":
        assert isinstance(value, int | np.integer) and not isinstance(value, bool) and value >= 1
    if name == "ray":
        assert value is None
