"""Issue #13 problem 4: the 21 inputs that ended in a traceback. Each is now one line
on stderr and exit code 2, run as a user would (a subprocess, so nothing the test
harness catches can hide a traceback)."""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from nightjar.profile.profile import load_profile

A100 = "a100-80gb/vicuna-13b+vicuna-68m"
HUGE = 10**23  # beyond int64
AZURE_HEAD = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def write(folder: Path, name: str, text: str | bytes) -> str:
    path = folder / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return str(path)


def trace_json(**req: object) -> str:
    base: dict[str, object] = {"arrival_s": 0, "prompt_tokens": 10, "output_tokens": 8}
    return json.dumps({"requests": [{**base, **req}]})


def profile_json(edit: str) -> str:
    data = load_profile(A100).to_json()
    if edit == "bigint":
        data["memory"]["device_bytes"] = HUGE
    elif edit == "bigrow":
        data["decode"][0][0] = HUGE
    elif edit == "zero_kv":
        data["memory"]["target_weight_bytes"] = data["memory"]["device_bytes"]
    return json.dumps(data)


NESTED = "[" * 100_000 + "]" * 100_000
SHAREGPT = '[{"conversations":[{"from":"human","value":"hi"},{"from":"gpt","value":"yo"}]}]'


def cases(tmp: Path) -> dict[str, list[str]]:
    """name -> argv after ``nightjar``; files are written into ``tmp``."""
    sim = ["sim", "--no-oracle", "--quiet", "--no-report", "--policy", "nospec"]
    out = ["--out", str(tmp / "o")]
    return {
        "trace prompt beyond int64": [
            *sim, "--trace", write(tmp, "t1.json", trace_json(prompt_tokens=HUGE)), *out],
        "trace output beyond int64": [
            *sim, "--trace", write(tmp, "t2.json", trace_json(output_tokens=HUGE)), *out],
        "trace token id beyond int64": [
            *sim, "--trace", write(tmp, "t3.json", trace_json(prompt_token_ids=[HUGE])), *out],
        "trace seed beyond int64": [
            "trace", "show", write(tmp, "t4.json", json.dumps(
                {"seed": 2**64 + 1, "segments": [{"duration_s": 1, "rate_rps": 1}]}))],
        "segment length beyond int64": [
            "trace", "show", write(tmp, "t5.json", json.dumps({"segments": [
                {"duration_s": 1, "rate_rps": 5, "prompt_tokens": {"dist": "uniform",
                                                                   "min": 1, "max": HUGE}}]}))],
        "azure context beyond int64": [
            "trace", "import", "azure", write(tmp, "a1.csv", AZURE_HEAD + f"0,{HUGE},5\n"),
            "--out", str(tmp / "a1.json")],
        "azure generated beyond int64": [
            "trace", "import", "azure", write(tmp, "a2.csv", AZURE_HEAD + f"0,5,{HUGE}\n"),
            "--out", str(tmp / "a2.json")],
        "profile memory beyond int64": [
            *sim, "--profile", write(tmp, "p1.json", profile_json("bigint")), *out],
        "profile row beyond int64": [
            *sim, "--profile", write(tmp, "p2.json", profile_json("bigrow")), *out],
        "deeply nested trace": [*sim, "--trace", write(tmp, "n1.json", NESTED), *out],
        "deeply nested profile": [*sim, "--profile", write(tmp, "n2.json", NESTED), *out],
        "deeply nested sharegpt": [
            "trace", "import", "sharegpt", write(tmp, "n3.json", NESTED),
            "--out", str(tmp / "n3o.json")],
        "binary profile": [
            *sim, "--profile", write(tmp, "b.json", bytes(range(256)) * 8), *out],
        "profile with 0 KV blocks": [
            *sim, "--profile", write(tmp, "z.json", profile_json("zero_kv")), *out],
        "roofline writing 0 KV blocks": [
            "profile", "--roofline", "--gpu", "rtx4090", "--model", "vicuna-13b",
            "--draft", "vicuna-68m", "--out", str(tmp / "rtx.json")],
        "negative seed in sim": [*sim, "--seed", "-1", *out],
        "negative seed in trace show": ["trace", "show", "burst", "--seed", "-1"],
        "negative seed in sharegpt import": [
            "trace", "import", "sharegpt", write(tmp, "sg.json", SHAREGPT), "--seed", "-1",
            "--out", str(tmp / "sgo.json")],
        "window nan": ["trace", "show", "burst", "--window", "nan"],
        "burstiness 1e-30": [
            "trace", "gen", "--rate", "1", "--duration", "10", "--burstiness", "1e-30",
            "--out", str(tmp / "g.json")],
        "300-character --out": [*sim, "--out", str(tmp / ("x" * 300))],
        "superscript in a schedule": [
            "sim", "--no-oracle", "--quiet", "--policy", "schedule:²-3:1", *out],
    }


def bad_run_folder(tmp: Path) -> Path:
    """A sim run folder whose requests.csv has a non-integer token count."""
    from nightjar.cli import main

    trace = write(tmp, "v.json", trace_json())
    assert main(["sim", "--trace", trace, "--policy", "nospec", "--no-oracle", "--quiet",
                 "--no-report", "--out", str(tmp / "v")]) == 0
    csv = tmp / "v" / "nospec" / "requests.csv"
    lines = csv.read_text().splitlines()
    cells = lines[1].split(",")
    cells[2] = "12.5"
    csv.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n")
    return tmp / "v" / "nospec"


with tempfile.TemporaryDirectory() as _scratch:
    NAMES = [*cases(Path(_scratch)), "validate on a CSV with a non-integer cell"]


@pytest.mark.parametrize("name", NAMES)
def test_no_traceback(tmp_path: Path, name: str) -> None:
    if name.startswith("validate"):
        argv = ["validate", "--live-run", str(bad_run_folder(tmp_path)), "--profile", A100]
    else:
        argv = cases(tmp_path)[name]
    proc = subprocess.run(
        [sys.executable, "-m", "nightjar.cli", *argv], capture_output=True, text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("nightjar: error: ")
    assert not (tmp_path / "rtx.json").exists()  # the roofline no longer writes it

