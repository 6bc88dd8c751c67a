"""The hostile cases: every command and API function, fed what a careless or hostile
user would feed it. Each case says what the product owes the user (``expect``):

- ``refuse``: one line on stderr and exit 2 (the API: a ``NightjarInputError``), before
  any work is done;
- ``ok``: exit 0 (the API: a result);
- ``warn``: exit 0 with a warning on the terminal (the API: a Python warning);
- ``either``: ``ok`` or ``refuse``, but never a traceback or a hang.

``mention`` is a piece of text the error must contain (the flag or the file it is
about); ``check`` inspects what a run left behind.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tools.hostile import fixtures as fx

CheckFn = Callable[["Case", dict[str, Any]], str | None]


@dataclass
class Case:
    id: str
    group: str
    expect: str
    argv: list[str] | None = None
    code: str | None = None  # API: Python statements run in a worker (names: F, nightjar)
    mention: str | None = None
    check: CheckFn | None = None
    timeout: float = 40.0
    # A sequence of CLI runs before this one (e.g. the earlier run --force replaces).
    before: list[list[str]] = field(default_factory=list)
    signal: str | None = None  # send this signal after ``signal_after`` seconds
    signal_after: float = 2.0
    # API: exceptions that are the right answer by Python's own protocols (a missing
    # attribute, a missing key, an unknown keyword argument).
    raises: tuple[str, ...] = ()


class Fixtures:
    """Paths of the valid inputs, made under ``root``."""

    def __init__(self, root: Path, source: Path) -> None:
        self.root = root
        self.source = source
        self.trace = fx.write_json(root / "in" / "t3.json", fx.TRACE3)
        base = source / "nightjar" / "profile" / "bundled" / "a100-80gb__vicuna-13b+vicuna-68m.json"
        self.profile_doc: dict[str, Any] = json.loads(base.read_text(encoding="utf-8"))
        self.profile = fx.write_json(root / "in" / "profile.json", self.profile_doc)
        self.gpu = fx.write_json(root / "in" / "gpu.json", fx.GPU_SPEC)
        self.model = fx.write_json(root / "in" / "model.json", fx.MODEL_CONFIG)
        self.draft = fx.write_json(root / "in" / "draft.json", fx.DRAFT_CONFIG)
        self.sweep = root / "in" / "sweep.toml"
        self.sweep.write_text(fx.sweep_toml(self.trace), encoding="utf-8")
        self.run = root / "in" / "run"  # a run folder (made by the runner's setup)
        self.out = root / "out"
        self.out.mkdir(parents=True, exist_ok=True)

    def out_dir(self, case_id: str) -> Path:
        return self.out / case_id.replace("/", "__")


# -- small helpers -----------------------------------------------------------------------

SIM = ["sim", "--quiet", "--no-report"]


def _sim(f: Fixtures, out: Path, *extra: str, trace: str | None = None) -> list[str]:
    return [*SIM, "--no-oracle", "--policy", "nospec", "--trace", trace or str(f.trace),
            *extra, "--out", str(out)]


def _sweep(f: Fixtures, out: Path, *extra: str) -> list[str]:
    return ["sweep", "--quiet", "--no-report", "--jobs", "1", *extra, "--out", str(out)]


def _edit(doc: Any, path: tuple[Any, ...], value: Any) -> Any:
    d = copy.deepcopy(doc)
    node = d
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return d


# -- file arguments ----------------------------------------------------------------------


def _file_args(f: Fixtures) -> list[tuple[fx.FileArg, Callable[[Path, Path], list[str] | str]]]:
    """(file argument, how a command or API call takes it: argv or code)."""
    trace_text = json.dumps(fx.TRACE3, indent=1) + "\n"
    profile_text = json.dumps(f.profile_doc, indent=1) + "\n"
    trace = fx.FileArg("trace", ".json", lambda r: trace_text)
    profile = fx.FileArg("profile", ".json", lambda r: profile_text)
    toml = fx.FileArg("sweep-config", ".toml", lambda r: fx.sweep_toml(f.trace))
    gpu = fx.FileArg("gpu-spec", ".json", lambda r: json.dumps(fx.GPU_SPEC) + "\n")
    model = fx.FileArg("model-config", ".json", lambda r: json.dumps(fx.MODEL_CONFIG) + "\n")
    draft = fx.FileArg("draft-config", ".json", lambda r: json.dumps(fx.DRAFT_CONFIG) + "\n")
    azure = fx.FileArg("azure", ".csv", lambda r: fx.AZURE)
    vidur = fx.FileArg("vidur", ".csv", lambda r: fx.VIDUR)
    burst = fx.FileArg("burstgpt", ".csv", lambda r: fx.BURSTGPT)
    sharegpt = fx.FileArg("sharegpt", ".json", lambda r: json.dumps(fx.SHAREGPT) + "\n")
    vllm = fx.FileArg("vllm", ".jsonl", lambda r: fx.VLLM_JSONL)
    roof = ["profile", "--roofline", "--gpu", "a100-80gb"]
    return [
        (trace, lambda p, o: _sim(f, o, trace=str(p))),
        (profile, lambda p, o: _sim(f, o, "--profile", str(p))),
        (fx.FileArg("prior", ".json", lambda r: profile_text),
         lambda p, o: [*SIM, "--no-oracle", "--policy", "nightjar+", "--trace", str(f.trace),
                       "--prior", str(p), "--out", str(o)]),
        (toml, lambda p, o: _sweep(f, o, "--config", str(p))),
        (fx.FileArg("sweep-trace", ".json", lambda r: trace_text),
         lambda p, o: _sweep(f, o, "--trace", str(p), "--policy", "nospec")),
        (fx.FileArg("sweep-profile", ".json", lambda r: profile_text),
         lambda p, o: _sweep(f, o, "--trace", str(f.trace), "--policy", "nospec",
                             "--profile", str(p))),
        (fx.FileArg("validate-profile", ".json", lambda r: profile_text),
         lambda p, o: ["validate", "--live-run", str(f.run), "--profile", str(p),
                       "--gamma-max", "3"]),
        (fx.FileArg("show-profile", ".json", lambda r: profile_text),
         lambda p, o: ["profile", "--show", str(p)]),
        (gpu, lambda p, o: ["profile", "--roofline", "--gpu-spec", str(p), "--model",
                            "vicuna-13b", "--draft", "vicuna-68m", "--out", f"{o}.json"]),
        (model, lambda p, o: [*roof, "--model-config", str(p), "--draft-config", str(f.draft),
                              "--out", f"{o}.json"]),
        (draft, lambda p, o: [*roof, "--model-config", str(f.model), "--draft-config", str(p),
                              "--out", f"{o}.json"]),
        (fx.FileArg("show-trace", ".json", lambda r: trace_text),
         lambda p, o: ["trace", "show", str(p)]),
        (fx.FileArg("export-trace", ".json", lambda r: trace_text),
         lambda p, o: ["trace", "export", str(p), "--out", f"{o}.csv"]),
        (fx.FileArg("export-vllm-trace", ".json", lambda r: trace_text),
         lambda p, o: ["trace", "export", str(p), "--format", "vllm-timed-trace", "--out",
                       f"{o}.jsonl"]),
        (azure, lambda p, o: ["trace", "import", "azure", str(p), "--out", f"{o}.json"]),
        (sharegpt, lambda p, o: ["trace", "import", "sharegpt", str(p), "--out", f"{o}.json"]),
        (vidur, lambda p, o: ["trace", "import", "vidur", str(p), "--out", f"{o}.json"]),
        (burst, lambda p, o: ["trace", "import", "burstgpt", str(p), "--out", f"{o}.json"]),
        (vllm, lambda p, o: ["trace", "import", "vllm", str(p), "--out", f"{o}.json"]),
        (fx.FileArg("api-load_trace", ".json", lambda r: trace_text),
         lambda p, o: f"nightjar.load_trace({str(p)!r})"),
        (fx.FileArg("api-load_profile", ".json", lambda r: profile_text),
         lambda p, o: f"nightjar.load_profile({str(p)!r})"),
        (fx.FileArg("api-simulate-trace", ".json", lambda r: trace_text),
         lambda p, o: f"nightjar.simulate({str(p)!r}, None, 'nospec', oracle=False)"),
        (fx.FileArg("api-simulate-profile", ".json", lambda r: profile_text),
         lambda p, o: f"nightjar.simulate(F['trace'], {str(p)!r}, 'nospec', oracle=False)"),
    ]


def file_cases(f: Fixtures) -> list[Case]:
    cases = []
    csv_like = (".csv", ".jsonl")
    for arg, make in _file_args(f):
        for kind in (*fx.BROKEN, *fx.VALID):
            path = fx.make_kind(f.root, arg, kind)
            if kind in fx.VALID or (kind == "empty" and arg.ext == ".toml"):
                expect = "ok"  # (an empty TOML grid: every default)
            elif kind == "truncated" and arg.ext in csv_like:
                expect = "either"  # half a CSV can still be whole rows
            else:
                expect = "refuse"
            cid = f"file/{arg.name}/{kind}"
            made = make(path, f.out_dir(cid))
            mention = None if expect != "refuse" else path.name
            if isinstance(made, str):
                cases.append(Case(cid, "file", expect, code=made, mention=mention))
            else:
                cases.append(Case(cid, "file", expect, argv=made, mention=mention))
    # Folder arguments: a run folder for validate and load_run, a sweep for load_sweep.
    folder_kinds: dict[str, tuple[str, Callable[[Path], None]]] = {
        "missing": ("refuse", lambda p: None),
        "file": ("refuse", lambda p: p.write_text("x")),
        "fifo": ("refuse", lambda p: os.mkfifo(p)),
        "empty": ("refuse", lambda p: p.mkdir()),
        "garbage-summary": ("refuse", lambda p: (p.mkdir(), (p / "summary.json").write_text(
            "{nope"))),
        "summary-array": ("refuse", lambda p: (p.mkdir(), (p / "summary.json").write_text(
            "[1]"))),
        "summary-fifo": ("refuse", lambda p: (p.mkdir(), os.mkfifo(p / "summary.json"))),
        "csv-fifo": ("refuse", lambda p: (p.mkdir(), (p / "summary.json").write_text(
            json.dumps({"policy": "x", "engine": "sim", "trace": "t", "duration_s": 1})),
            os.mkfifo(p / "requests.csv"), (p / "steps.csv").write_text("a\n"))),
        "sub-fifo": ("refuse", lambda p: (p.mkdir(), (p / "x").mkdir(),
                                          os.mkfifo(p / "x" / "summary.json"))),
    }
    for kind, (expect, make_dir) in folder_kinds.items():
        base = f.root / "files" / "folders" / kind
        base.parent.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(base):
            make_dir(base)
        for name, make in (
            ("validate-live-run", lambda p: ["validate", "--live-run", str(p), "--profile",
                                             fx.A100, "--gamma-max", "3"]),
            ("api-load_run", lambda p: f"nightjar.load_run({str(p)!r})"),
            ("profile-from-run", lambda p: ["profile", "--from-run", str(p), "--base",
                                            fx.A100, "--out", f"{p}-fitted.json"]),
            ("api-load_sweep", lambda p: f"nightjar.load_sweep({str(p)!r})"),
        ):
            made = make(base)
            cid = f"folder/{name}/{kind}"
            if isinstance(made, str):
                cases.append(Case(cid, "file", expect, code=made, mention=kind))
            else:
                cases.append(Case(cid, "file", expect, argv=made, mention=kind))
    return cases


# -- output targets ----------------------------------------------------------------------


def _has_debris(root: Path) -> bool:
    return any(".nightjar-tmp-" in p.name for p in root.rglob(".*"))


def _written_into(target: Path) -> CheckFn:
    def check(case: Case, res: dict[str, Any]) -> str | None:
        if res["status"] == "ok" and not any(target.iterdir()):
            return "accepted"  # said it wrote, but the target is empty
        return None

    return check


def _kept(path: Path) -> CheckFn:
    def check(case: Case, res: dict[str, Any]) -> str | None:
        return None if path.exists() else "accepted"  # the user's file is gone

    return check


OUT_DIR_KINDS = ("new", "nested", "empty-dir", "file", "symlink-empty-dir", "symlink-file",
                 "dangling-symlink", "symlink-loop", "mount-empty", "mount-nonempty",
                 "mount-readonly", "parent-is-file", "fifo", "devnull", "nonempty",
                 "nonempty-force", "too-long", "in-proc")


def _out_dir_target(f: Fixtures, cid: str, kind: str) -> tuple[Path, str, CheckFn | None]:
    """(the --out to pass, the expectation, a check of what it left)."""
    base = f.out_dir(cid)
    base.mkdir(parents=True, exist_ok=True)
    out = base / "o"
    if kind == "new":
        return out, "ok", None
    if kind == "nested":
        return base / "a" / "b" / "c", "ok", None
    if kind == "empty-dir":
        out.mkdir(exist_ok=True)
        return out, "ok", None
    if kind == "file":
        out.write_text("mine")
        return out, "refuse", _kept(out)
    if kind == "symlink-empty-dir":
        real = base / "real"
        real.mkdir(exist_ok=True)
        if not os.path.lexists(out):
            out.symlink_to(real)
        return out, "ok", _written_into(real)
    if kind == "symlink-file":
        real = base / "real.txt"
        real.write_text("mine")
        if not os.path.lexists(out):
            out.symlink_to(real)
        return out, "refuse", _kept(real)
    if kind == "dangling-symlink":
        if not os.path.lexists(out):
            out.symlink_to(base / "nowhere")
        return out, "either", None
    if kind == "symlink-loop":
        if not os.path.lexists(out):
            out.symlink_to(out)
        return out, "refuse", None
    if kind.startswith("mount-"):
        out.mkdir(exist_ok=True)
        opts = "ro" if kind == "mount-readonly" else "rw"
        os.system(f"mountpoint -q {out} || mount -t tmpfs -o {opts},size=64m none {out}")
        if kind == "mount-nonempty":
            (out / "mine.txt").write_text("mine")
            return out, "refuse", _kept(out / "mine.txt")
        return out, ("refuse" if kind == "mount-readonly" else "ok"), None
    if kind == "parent-is-file":
        (base / "plain").write_text("mine")
        return base / "plain" / "o", "refuse", None
    if kind == "fifo":
        if not os.path.lexists(out):
            os.mkfifo(out)
        return out, "refuse", None
    if kind == "devnull":
        return Path("/dev/null"), "refuse", None
    if kind in ("nonempty", "nonempty-force"):
        out.mkdir(exist_ok=True)
        (out / "mine.txt").write_text("mine")
        return out, ("refuse" if kind == "nonempty" else "ok"), _kept(out / "mine.txt")
    if kind == "too-long":
        return base / ("x" * 300), "refuse", None
    if kind == "in-proc":
        return Path("/proc/self/nightjar-out"), "refuse", None
    raise ValueError(kind)


def out_cases(f: Fixtures) -> list[Case]:
    cases = []
    commands: dict[str, Callable[[Path], list[str] | str]] = {
        "sim": lambda o: _sim(f, o),
        "sim-seeds": lambda o: _sim(f, o, "--seeds", "2"),
        "validate": lambda o: ["validate", "--live-run", str(f.run), "--profile", fx.A100,
                               "--gamma-max", "3", "--out", str(o)],
        "sweep": lambda o: _sweep(f, o, "--trace", str(f.trace), "--policy", "nospec"),
        "api-write": lambda o: (f"nightjar.simulate(F['trace'], None, 'nospec', oracle=False)"
                                f".write({str(o)!r}, report=False)"),
        "api-run_sweep": lambda o: (f"nightjar.run_sweep({str(o)!r}, trace=[F['trace']], "
                                    "policy=['nospec'], report=False)"),
    }
    for name, make in commands.items():
        for kind in OUT_DIR_KINDS:
            cid = f"out-dir/{name}/{kind}"
            out, expect, check = _out_dir_target(f, cid, kind)
            made = make(out)
            force = kind == "nonempty-force"
            if isinstance(made, str):
                if force:
                    made = made.replace(")", ", force=True)", 1) if "write(" not in made else \
                        made.replace("report=False", "report=False, force=True")
                cases.append(Case(cid, "out", expect, code=made, check=check))
            else:
                cases.append(Case(cid, "out", expect, argv=made + (["--force"] if force else []),
                                  check=check))
    file_commands: dict[str, Callable[[Path], list[str]]] = {
        "trace-gen": lambda o: ["trace", "gen", "--rate", "1", "--duration", "3", "--out",
                                str(o)],
        "trace-import": lambda o: ["trace", "import", "vidur",
                                   str(fx.make_kind(f.root, fx.FileArg(
                                       "vidur", ".csv", lambda r: fx.VIDUR), "plain")),
                                   "--out", str(o)],
        "trace-export": lambda o: ["trace", "export", str(f.trace), "--out", str(o)],
        "trace-export-vllm": lambda o: ["trace", "export", str(f.trace), "--format",
                                        "vllm-timed-trace", "--out", str(o)],
        "profile-roofline": lambda o: ["profile", "--roofline", "--gpu", "a100-80gb", "--model",
                                       "vicuna-13b", "--draft", "vicuna-68m", "--out", str(o)],
    }
    for name, make in file_commands.items():
        for kind in ("new", "exists", "exists-force", "directory", "fifo", "fifo-force",
                     "devnull-force", "devfull-force", "symlink-file-force", "dangling-symlink",
                     "parent-missing", "parent-is-file", "too-long", "same-as-input",
                     "mount-readonly"):
            cid = f"out-file/{name}/{kind}"
            base = f.out_dir(cid)
            base.mkdir(parents=True, exist_ok=True)
            out = base / "o.json"
            expect, check, force = "refuse", None, kind.endswith("-force")
            if kind == "new":
                expect = "ok"
            elif kind in ("exists", "exists-force"):
                out.write_text("mine")
                expect, check = ("refuse", _kept(out)) if kind == "exists" else ("ok", None)
            elif kind == "directory":
                out.mkdir(exist_ok=True)
            elif kind.startswith("fifo"):
                if not os.path.lexists(out):
                    os.mkfifo(out)
            elif kind == "devnull-force":
                out = Path("/dev/null")
            elif kind == "devfull-force":
                out = Path("/dev/full")
            elif kind == "symlink-file-force":
                real = base / "real.json"
                real.write_text("mine")
                if not os.path.lexists(out):
                    out.symlink_to(real)
                expect = "either"
            elif kind == "dangling-symlink":
                if not os.path.lexists(out):
                    out.symlink_to(base / "nowhere.json")
                expect = "either"
            elif kind == "parent-missing":
                out = base / "a" / "b" / "o.json"
                expect = "either"
            elif kind == "parent-is-file":
                (base / "plain").write_text("mine")
                out = base / "plain" / "o.json"
            elif kind == "too-long":
                out = base / ("x" * 300 + ".json")
            elif kind == "same-as-input":
                src = base / "input.csv"
                src.write_text(fx.VIDUR)
                src_json = base / "input.json"
                src_json.write_text(json.dumps(fx.TRACE3))
                argv = make(out)
                if name == "trace-import":
                    argv = ["trace", "import", "vidur", str(src), "--out", str(src), "--force"]
                    check = _same_text(src, fx.VIDUR)
                elif name == "trace-export":
                    argv = ["trace", "export", str(src_json), "--out", str(src_json), "--force"]
                    check = _same_text(src_json, json.dumps(fx.TRACE3))
                else:
                    continue
                cases.append(Case(cid, "out", "refuse", argv=argv, check=check))
                continue
            elif kind == "mount-readonly":
                mnt = base / "ro"
                mnt.mkdir(exist_ok=True)
                os.system(f"mountpoint -q {mnt} || mount -t tmpfs -o ro,size=1m none {mnt}")
                out = mnt / "o.json"
            argv = make(out) + (["--force"] if force else [])
            cases.append(Case(cid, "out", expect, argv=argv, check=check))
    return cases


def _same_text(path: Path, text: str) -> CheckFn:
    def check(case: Case, res: dict[str, Any]) -> str | None:
        ok = path.exists() and path.read_text() == text
        return None if ok else "accepted"  # the input was overwritten

    return check


# -- --force over an earlier run, and signals -------------------------------------------


def _only_policies(out: Path, want: list[str]) -> CheckFn:
    def check(case: Case, res: dict[str, Any]) -> str | None:
        if res["status"] != "ok":
            return None
        runs = sorted(p.name for p in out.iterdir() if (p / "summary.json").exists())
        seeds = sorted(p.name for p in out.iterdir() if p.name.startswith("seed-"))
        return None if runs == want and not seeds else "accepted"

    return check


def _api_policies(out: Path, want: list[str]) -> str:
    return (f"got = [r.policy for r in nightjar.load_run({str(out)!r})]\n"
            f"assert got == {want!r}, got")


def force_cases(f: Fixtures) -> list[Case]:
    cases = []
    o1 = f.out_dir("force/sim-policies")
    cases.append(Case("force/sim-policies", "force", "ok",
                      before=[[*SIM, "--no-oracle", "--trace", str(f.trace), "--policy", "nospec",
                               "--policy", "fixed:1", "--out", str(o1)]],
                      argv=[*SIM, "--no-oracle", "--trace", str(f.trace), "--policy", "fixed:2",
                            "--out", str(o1), "--force"],
                      check=_only_policies(o1, ["fixed-2"])))
    o2 = f.out_dir("force/sim-seeds")
    cases.append(Case("force/sim-seeds", "force", "ok",
                      before=[_sim(f, o2, "--seeds", "3")],
                      argv=[*_sim(f, o2), "--force"], check=_only_policies(o2, ["nospec"])))
    o3 = f.out_dir("force/load_run")
    cases.append(Case("force/load_run", "force", "ok",
                      before=[[*SIM, "--no-oracle", "--trace", str(f.trace), "--policy", "nospec",
                               "--policy", "fixed:1", "--out", str(o3)],
                              [*SIM, "--no-oracle", "--trace", "steady_low", "--policy",
                               "fixed:2", "--out", str(o3), "--force"]],
                      code=_api_policies(o3, ["fixed:2"])))
    o4 = f.out_dir("force/validate")
    cases.append(Case("force/validate", "force", "ok",
                      before=[[*SIM, "--no-oracle", "--trace", str(f.trace), "--policy", "nospec",
                               "--policy", "fixed:1", "--out", str(o4)],
                              [*SIM, "--no-oracle", "--trace", str(f.trace), "--policy",
                               "fixed:2", "--out", str(o4), "--force"]],
                      argv=["validate", "--live-run", str(o4), "--profile", fx.A100,
                            "--gamma-max", "3"],
                      check=_no_text("nospec")))
    o5 = f.out_dir("force/api-write")
    cases.append(Case("force/api-write", "force", "ok",
                      before=[[*SIM, "--no-oracle", "--trace", str(f.trace), "--policy", "nospec",
                               "--out", str(o5)]],
                      code=(f"nightjar.simulate(F['trace'], None, 'fixed:1', oracle=False)"
                            f".write({str(o5)!r}, force=True, report=False)\n"
                            + _api_policies(o5, ["fixed:1"]))))
    for sig in ("SIGINT", "SIGTERM", "SIGHUP"):
        o = f.out_dir(f"signal/sim/{sig}")
        cases.append(Case(f"signal/sim/{sig}", "signal", "interrupted",
                          argv=["sim", "--no-report", "--trace", "burst", "--out", str(o)],
                          signal=sig, signal_after=3.0, check=_no_debris(o.parent)))
        o = f.out_dir(f"signal/sim-force/{sig}")
        cases.append(Case(f"signal/sim-force/{sig}", "signal", "interrupted",
                          before=[_sim(f, o)],
                          argv=["sim", "--no-report", "--trace", "burst", "--out", str(o),
                                "--force"],
                          signal=sig, signal_after=3.0, check=_no_debris(o.parent)))
        o = f.out_dir(f"signal/sweep/{sig}")
        # 30 cells (about 10 s of work on the 2-core machine): the signal must land
        # mid-sweep however fast the simulator gets (3 cells once took 4 s, then less).
        cases.append(Case(f"signal/sweep/{sig}", "signal", "interrupted",
                          argv=_sweep(f, o, "--trace", "burst", "--policy", "nospec",
                                      "--policy", "fixed:1", "--policy", "fixed:2",
                                      "--seeds", "10"),
                          signal=sig, signal_after=4.0, check=_no_debris(o)))
    return cases


def _no_text(word: str) -> CheckFn:
    def check(case: Case, res: dict[str, Any]) -> str | None:
        return "accepted" if word in res.get("stdout", "") else None

    return check


def _no_debris(root: Path) -> CheckFn:
    def check(case: Case, res: dict[str, Any]) -> str | None:
        return "debris" if root.exists() and _has_debris(root) else None

    return check


# -- profiles ----------------------------------------------------------------------------


def _row_index(doc: dict[str, Any], b: int, g: int, c: float) -> int:
    for i, row in enumerate(doc["decode"]):
        if row[0] == b and row[1] == g and row[2] == c:
            return i
    raise KeyError((b, g, c))


def profile_docs(doc: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """name -> (expectation, edited profile document)."""
    out: dict[str, tuple[str, Any]] = {}
    i = _row_index(doc, 4, 3, 128)
    row = doc["decode"][i]
    out["step-zero"] = ("refuse", _edit(doc, ("decode", i, 3), 0))
    out["step-negative"] = ("refuse", _edit(doc, ("decode", i, 3), -1))
    out["step-below-parts"] = ("refuse", _edit(doc, ("decode", i, 3), (row[4] + row[5]) * 0.5))
    out["step-equals-parts"] = ("ok", _edit(doc, ("decode", i, 3), row[4] + row[5]))
    out["step-rounding-below-parts"] = ("ok", _edit(doc, ("decode", i, 3),
                                                    row[4] + row[5] - 1e-5))
    out["verify-zero"] = ("refuse", _edit(doc, ("decode", i, 5), 0))
    out["draft-zero-at-gamma3"] = ("either", _edit(doc, ("decode", i, 4), 0))
    j = _row_index(doc, 4, 0, 128)
    out["draft-at-gamma0"] = ("refuse", _edit(doc, ("decode", j, 4), 3.0))
    out["all-zero"] = ("refuse", {**doc, "decode": [[r[0], r[1], r[2], 0, 0, 0]
                                                    for r in doc["decode"]]})
    out["tiny-times"] = ("refuse", {**doc, "decode": [[r[0], r[1], r[2], 1e-300, 0, 1e-300]
                                                      if r[1] == 0 else
                                                      [r[0], r[1], r[2], 3e-300, 1e-300, 1e-300]
                                                      for r in doc["decode"]]})
    out["huge-times"] = ("either", {**doc, "decode": [[r[0], r[1], r[2], r[3] * 1e290,
                                                       r[4] * 1e290, r[5] * 1e290]
                                                      for r in doc["decode"]]})
    # gamma 4 cheaper than gamma 0 everywhere: a larger verify cannot cost less.
    g4 = {**doc, "decode": [[r[0], r[1], r[2], r[3] * (0.3 if r[1] == 4 else 1),
                             r[4] * (0.3 if r[1] == 4 else 1), r[5] * (0.3 if r[1] == 4 else 1)]
                            for r in doc["decode"]]}
    out["gamma4-cheaper-than-gamma0"] = ("warn", g4)
    b_inv = copy.deepcopy(doc)
    for r in b_inv["decode"]:
        if r[0] == 8:
            r[3], r[4], r[5] = r[3] * 0.6, r[4] * 0.6, r[5] * 0.6
    out["batch-inversion"] = ("warn", b_inv)
    small = copy.deepcopy(doc)
    small["decode"][i] = [row[0], row[1], row[2], row[3] * 0.97, row[4] * 0.97, row[5] * 0.97]
    out["small-noise"] = ("ok", small)
    out["draft-forward-zero"] = ("either", _edit(doc, ("draft_forward", 0, 2), 0))
    out["prefill-zero"] = ("refuse", _edit(doc, ("prefill", 2, 1), 0))
    pf = copy.deepcopy(doc)
    pf["prefill"][-1][1] = pf["prefill"][0][1] * 0.5
    out["prefill-decreasing"] = ("warn", pf)
    big_b = copy.deepcopy(doc)
    for r in big_b["decode"]:
        if r[0] == max(x[0] for x in doc["decode"]):
            r[0] = 2**40
    for r in big_b["draft_forward"]:
        if r[0] == max(x[0] for x in doc["draft_forward"]):
            r[0] = 2**40
    out["batch-2**40"] = ("refuse", big_b)
    out["context-huge"] = ("either", {**doc, "decode": [[r[0], r[1], r[2] * 1e300 if r[2] else 0,
                                                         *r[3:]] for r in doc["decode"]],
                                      "draft_forward": [[r[0], r[1] * 1e300 if r[1] else 0, r[2]]
                                                        for r in doc["draft_forward"]]})
    mem = doc["memory"]
    out["kv-pin-huge"] = ("refuse", _edit(_edit(doc, ("memory", "kv_blocks_with_draft"), 2**61),
                                          ("memory", "kv_blocks_without_draft"), 2**61))
    out["kv-pin-with-above-without"] = ("refuse", _edit(
        _edit(doc, ("memory", "kv_blocks_with_draft"), 5000),
        ("memory", "kv_blocks_without_draft"), 4000))
    out["kv-pin-only-with"] = ("either", _edit(doc, ("memory", "kv_blocks_with_draft"), 4000))
    out["block-size-huge"] = ("refuse", _edit(doc, ("memory", "block_size"), 2**40))
    out["draft-weights-over-device"] = ("refuse", _edit(doc, ("memory", "draft_weight_bytes"),
                                                        mem["device_bytes"] * 2))
    out["utilization-tiny"] = ("refuse", _edit(doc, ("memory", "gpu_memory_utilization"), 1e-9))
    out["host-link-tiny"] = ("refuse", _edit(doc, ("memory", "host_link_bytes_per_s"), 1e-300))
    out["bandwidth-tiny"] = ("refuse", _edit(doc, ("memory", "device_bandwidth_bytes_per_s"),
                                             1e-300))
    out["acceptance-near-1"] = ("ok", _edit(doc, ("acceptance", "sharegpt", "mean"),
                                            0.9999999))
    out["concentration-huge"] = ("either", _edit(doc, ("acceptance", "sharegpt",
                                                       "concentration"), 1e300))
    out["acceptance-missing"] = ("either", {**doc, "acceptance": {}})
    out["format-version-string"] = ("refuse", {**doc, "format_version": "1"})
    out["max-model-len-1"] = ("either", _edit(doc, ("memory", "max_model_len"), 1))
    out["step-nan-string"] = ("refuse", _edit(doc, ("decode", i, 3), "NaN"))
    out["one-batch"] = ("ok", {**doc, "decode": [r for r in doc["decode"] if r[0] == 1],
                               "draft_forward": [r for r in doc["draft_forward"] if r[0] == 1]})
    out["mixed-negative"] = ("refuse", {**doc, "mixed": [[1, 64, -1.0], [1, 128, 2.0]]})
    out["mixed-ok"] = ("ok", {**doc, "mixed": [[1, 64, 1.0], [1, 128, 2.0]]})
    out["name-newline"] = ("either", {**doc, "name": "a\nb\u001b[31m"})
    return out


def profile_cases(f: Fixtures) -> list[Case]:
    cases = []
    for name, (expect, doc) in profile_docs(f.profile_doc).items():
        path = fx.write_json(f.root / "profiles" / f"{name}.json", doc)
        mention = None
        o = f.out_dir(f"profile/sim/{name}")
        cases.append(Case(f"profile/sim/{name}", "profile", expect, mention=mention,
                          argv=[*SIM, "--trace", str(f.trace), "--profile", str(path),
                                "--out", str(o)]))
        cases.append(Case(f"profile/api/{name}", "profile", expect, mention=mention,
                          code=f"nightjar.simulate(F['trace'], {str(path)!r})"))
        o = f.out_dir(f"profile/sweep/{name}")
        cases.append(Case(f"profile/sweep/{name}", "profile", expect, mention=mention,
                          argv=_sweep(f, o, "--trace", str(f.trace), "--profile", str(path),
                                      "--policy", "nightjar+", "--policy", "dsd")))
        cases.append(Case(f"profile/validate/{name}", "profile", expect, mention=mention,
                          argv=["validate", "--live-run", str(f.run), "--profile", str(path),
                                "--gamma-max", "3"]))
    return cases


# -- traces ------------------------------------------------------------------------------


def trace_docs() -> dict[str, tuple[str, Any]]:
    def req(**kw: Any) -> dict[str, Any]:
        return {"requests": [{"arrival_s": 0.0, "prompt_tokens": 20, "output_tokens": 4, **kw},
                             {"arrival_s": 0.5, "prompt_tokens": 10, "output_tokens": 3}]}

    def seg(**kw: Any) -> dict[str, Any]:
        return {"seed": 1, "segments": [{"duration_s": 2, "rate_rps": 2, **kw}]}

    epoch = {"requests": [{"arrival_s": 1700000000.0 + k, "prompt_tokens": 20,
                           "output_tokens": 4} for k in range(3)]}
    return {
        "epoch-arrivals": ("refuse", epoch),
        "epoch-arrivals-ms": ("refuse", {"requests": [
            {"arrival_s": 1700000000000.0 + k, "prompt_tokens": 20, "output_tokens": 4}
            for k in range(3)]}),
        "arrival-1e300": ("refuse", req(arrival_s=1e300)),
        "arrival-negative-zero": ("ok", req(arrival_s=-0.0)),
        "prompt-2**40": ("refuse", req(prompt_tokens=2**40)),
        "token-id-huge": ("refuse", req(prompt_tokens=2, prompt_token_ids=[5, 2**40])),
        "token-id-negative": ("refuse", req(prompt_tokens=2, prompt_token_ids=[5, -1])),
        "output-zero": ("refuse", req(output_tokens=0)),
        "acceptance-1": ("refuse", req(acceptance=1.0)),
        "acceptance-near-1": ("ok", req(acceptance=0.999999)),
        "lone-surrogate-name": ("either", {**req(), "name": "\ud800x"}),
        "lone-surrogate-prompt": ("either", req(prompt="hi \udfff there")),
        "ansi-name": ("either", {**req(), "name": "\u001b[31mred\u001b[0m\nline"}),
        "long-name": ("either", {**req(), "name": "n" * 100000}),
        "unsorted": ("ok", {"requests": list(reversed(req()["requests"]))}),
        "seed-2**63": ("refuse", {**req(), "seed": 2**63}),
        "seed-negative": ("refuse", {**req(), "seed": -1}),
        "arrival-string": ("refuse", req(arrival_s="0")),
        "prompt-empty-text": ("refuse", {"requests": [{"arrival_s": 0, "output_tokens": 2,
                                                       "prompt": ""}]}),
        "duration-before-last": ("refuse", {**req(), "duration_s": 0.1}),
        "segment-span-1e300": ("refuse", {"segments": [{"duration_s": 1e300,
                                                        "rate_rps": 1e-300}]}),
        "segment-tiny-duration": ("refuse", seg(duration_s=1e-300)),
        "segment-mix-overflow": ("refuse", seg(mix={"sharegpt": 1e308, "alpaca": 1e308})),
        "segment-lognormal-huge": ("either", seg(prompt_tokens={"dist": "lognormal",
                                                               "mean": 1e300, "sigma": 1})),
        "segment-speculate-string": ("refuse", seg(speculate="yes")),
        "segment-workload-unknown": ("refuse", seg(workload="nope")),
        "segment-rate-zero": ("refuse", seg(rate_rps=0)),
        "segment-burstiness-min": ("ok", seg(burstiness=1e-3)),
        "duplicate-keys": ("ok", None),  # written by hand below
        "top-array": ("refuse", [1, 2]),
    }


def trace_cases(f: Fixtures) -> list[Case]:
    cases = []
    for name, (expect, doc) in trace_docs().items():
        path = f.root / "traces" / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        if doc is None:
            path.write_text('{"requests": [{"arrival_s": 0, "arrival_s": 1, "prompt_tokens": 5,'
                            ' "output_tokens": 2}]}')
        else:
            path.write_text(json.dumps(doc))
        o = f.out_dir(f"trace/sim/{name}")
        cases.append(Case(f"trace/sim/{name}", "trace", expect,
                          argv=[*SIM, "--trace", str(path), "--out", str(o)]))
        # `trace show` describes a trace; it is no run, so an unservable one shows fine.
        shows = "either" if name == "prompt-2**40" else expect
        cases.append(Case(f"trace/show/{name}", "trace", shows,
                          argv=["trace", "show", str(path)]))
        cases.append(Case(f"trace/api/{name}", "trace", expect,
                          code=f"nightjar.simulate({str(path)!r}, None, ['nospec', 'fixed:2'])"))
        o = f.out_dir(f"trace/sweep/{name}")
        cases.append(Case(f"trace/sweep/{name}", "trace", expect,
                          argv=_sweep(f, o, "--trace", str(path), "--policy", "nospec")))
    # Importers: odd rows.
    imports = {
        "azure-bom": ("ok", "azure", ".csv", "\ufeff" + fx.AZURE),
        "azure-crlf": ("ok", "azure", ".csv", fx.AZURE.replace("\n", "\r\n")),
        "azure-bom-crlf": ("ok", "azure", ".csv", "\ufeff" + fx.AZURE.replace("\n", "\r\n")),
        "azure-huge-tokens": ("refuse", "azure", ".csv",
                              "TIMESTAMP,ContextTokens,GeneratedTokens\n0,1" + "0" * 400 + ",3\n"),
        "azure-1e400": ("refuse", "azure", ".csv",
                        "TIMESTAMP,ContextTokens,GeneratedTokens\n1e400,10,3\n"),
        "azure-epoch-seconds": ("ok", "azure", ".csv",
                                "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                "1700000000,10,3\n1700000001,12,4\n"),
        "azure-lone-surrogate": ("refuse", "azure", ".csv", None),
        "vidur-bom": ("ok", "vidur", ".csv", "\ufeff" + fx.VIDUR),
        "vidur-epoch": ("refuse", "vidur", ".csv",
                        "arrived_at,num_prefill_tokens,num_decode_tokens\n"
                        "1700000000.0,40,6\n1700000000.5,30,4\n"),
        "vidur-huge": ("refuse", "vidur", ".csv",
                       "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1e300,6\n"),
        "burstgpt-bom": ("ok", "burstgpt", ".csv", "\ufeff" + fx.BURSTGPT),
        "burstgpt-epoch": ("ok", "burstgpt", ".csv", fx.BURSTGPT.replace("\n5,", "\n1700000005,")
                           .replace("\n45,", "\n1700000045,").replace("\n118,", "\n1700000118,")),
        "sharegpt-surrogate": ("either", "sharegpt", ".json",
                               '[{"conversations": [{"from": "human", "value": "hi \\ud800"},'
                               ' {"from": "gpt", "value": "yo"}]}]'),
        "sharegpt-bom": ("ok", "sharegpt", ".json", "\ufeff" + json.dumps(fx.SHAREGPT)),
        "vllm-surrogate": ("either", "vllm", ".jsonl", '{"prompt": "hi \\udfff"}\n'),
        "vllm-bom": ("ok", "vllm", ".jsonl", "\ufeff" + fx.VLLM_JSONL),
        "vllm-output-huge": ("refuse", "vllm", ".jsonl",
                             '{"prompt": "hi", "output_tokens": 1' + "0" * 30 + "}\n"),
        "vllm-output-zero": ("refuse", "vllm", ".jsonl", '{"prompt": "hi", "output_tokens": 0}\n'),
    }
    for name, (expect, kind, ext, text) in imports.items():
        path = f.root / "imports" / f"{name}{ext}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if text is None:
            path.write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n\xed\xa0\x80,1,2\n")
        else:
            path.write_text(text, encoding="utf-8", errors="surrogatepass")
        o = f.out_dir(f"import/{name}")
        cases.append(Case(f"import/{name}", "trace", expect,
                          argv=["trace", "import", kind, str(path), "--out", f"{o}.json"]))
    return cases


# -- flags -------------------------------------------------------------------------------


def flag_cases(f: Fixtures) -> list[Case]:
    cases: list[Case] = []

    def add(group: str, cid: str, expect: str, argv: list[str], mention: str | None = None,
            timeout: float = 40.0) -> None:
        cases.append(Case(f"{group}/{cid}", group, expect, argv=argv, mention=mention,
                          timeout=timeout))

    # nightjar sim
    sim_values: dict[str, list[tuple[str, str]]] = {
        "--seed": [("0", "ok"), ("-1", "refuse"), (str(2**64), "refuse"), ("x", "refuse"),
                   ("1.5", "refuse")],
        "--gamma-max": [("0", "refuse"), ("5", "ok"), ("9", "refuse"), (str(10**9), "refuse"),
                        ("-3", "refuse")],
        "--burstiness": [("0", "refuse"), ("-1", "refuse"), ("nan", "refuse"), ("inf", "refuse"),
                         ("x", "refuse"), ("1e-300", "refuse"), ("0.5", "ok")],
        "--max-num-seqs": [("0", "refuse"), ("-1", "refuse"), (str(2**62), "ok"),
                           (str(2**64), "either")],
        "--max-num-batched-tokens": [("0", "refuse"), ("1", "refuse"), ("6", "ok"),
                                     (str(2**62), "ok"),
                                     ("-5", "refuse")],
        "--max-model-len": [("0", "refuse"), ("1", "refuse"), (str(2**62), "ok")],
        "--slo-ttft": [("0", "refuse"), ("-1", "refuse"), ("nan", "refuse"), ("inf", "either"),
                       ("1e-300", "either"), ("x", "refuse")],
        "--slo-tpot": [("0", "refuse"), ("-1", "refuse"), ("nan", "refuse"), ("inf", "either")],
        "--seeds": [("0", "refuse"), ("-1", "refuse"), (str(10**9), "refuse"), ("2", "ok")],
        "--prior": [("scale:0", "refuse"), ("scale:nan", "refuse"), ("scale:-1", "refuse"),
                    ("scale:inf", "refuse"), ("scale:1e-320", "refuse"),
                    ("scale:1e300", "refuse"), ("spec-scale:0", "either"),
                    ("spec-scale:-5", "refuse"), ("spec-scale:1e300", "refuse"),
                    ("exact:", "refuse"), ("none", "refuse"), ("", "refuse"),
                    ("scale:2", "ok")],  # (none: dsd, in the list, needs a table)
    }
    policies = ["nospec", "fixed:1", "nightjar+", "dsd", "oracle"]
    for flag, values in sim_values.items():
        for value, expect in values:
            argv = [*SIM, "--trace", str(f.trace), *[x for p in policies for x in ("--policy", p)],
                    flag, value, "--out", str(f.out_dir(f"sim-flag/{flag}/{value}"))]
            add("flag-sim", f"{flag}={value}", expect, argv, mention=flag)
    specs = [("", "refuse"), (" ", "refuse"), ("fixed:-1", "refuse"), ("fixed:1e3", "refuse"),
             ("fixed:4.0", "refuse"), ("schedule:1-:5", "refuse"), ("schedule:5-1:2", "refuse"),
             ("schedule:1-4:2", "either"), ("nightjar:x", "refuse"), ("NOSPEC", "refuse"),
             ("all", "ok"), ("fixed:99999999999999999999", "refuse"), ("x" * 5000, "refuse"),
             ("tetris:0", "either"), ("fixed:\u00b2", "refuse"), ("fixed:1\n", "either"),
             ("schedule:1-16:3,17-:0", "ok"), ("banditspec:abc", "refuse")]
    for spec, expect in specs:
        argv = [*SIM, "--trace", str(f.trace), "--policy", spec, "--out",
                str(f.out_dir(f"sim-policy/{len(cases)}"))]
        add("flag-sim", f"--policy={spec[:40]!r}", expect, argv)
    combos: list[tuple[str, str, list[str]]] = [
        ("dup-policy", "either", ["--policy", "fixed:1", "--policy", "fixed:1"]),
        ("dsd-prior-none", "refuse", ["--policy", "dsd", "--prior", "none"]),
        # The default --offload auto moves a draft model: migrate has a reload to run.
        ("migrate-offload-auto", "ok", ["--reload", "migrate"]),
        ("migrate-offload-off", "refuse", ["--reload", "migrate", "--offload", "off"]),
        ("migrate-offload", "ok", ["--reload", "migrate", "--offload", "on"]),
        ("v0", "ok", ["--engine", "v0"]),
        ("positional", "ok", ["--acceptance", "positional"]),
        ("parquet", "ok", ["--format", "parquet"]),
        ("unfit-refuse", "refuse", ["--max-model-len", "30"]),
        ("unfit-skip", "ok", ["--max-model-len", "45", "--on-unfit", "skip"]),
        ("seed-overflow-seeds", "refuse", ["--seed", str(2**63 - 1), "--seeds", "2"]),
        ("trace-bundled-typo", "refuse", ["--trace", "burstt"]),
        ("profile-bundled-typo", "refuse", ["--profile", "a100"]),
    ]
    for name, expect, extra in combos:
        argv = [*SIM, "--trace", str(f.trace), *extra, "--out",
                str(f.out_dir(f"sim-combo/{name}"))]
        if "--trace" in extra:
            argv = [*SIM, *extra, "--out", str(f.out_dir(f"sim-combo/{name}"))]
        add("flag-sim", f"combo/{name}", expect, argv)

    # nightjar sweep
    sw: list[tuple[str, str, list[str]]] = [
        ("rate-scale=0", "refuse", ["--rate-scale", "0"]),
        ("rate-scale=-1", "refuse", ["--rate-scale", "-1"]),
        ("rate-scale=nan", "refuse", ["--rate-scale", "nan"]),
        ("rate-scale=inf", "refuse", ["--rate-scale", "inf"]),
        ("rate-scale=1e-300", "refuse", ["--rate-scale", "1e-300"]),
        ("rate-scale=1e300", "either", ["--rate-scale", "1e300"]),
        ("rate-scale=dup", "refuse", ["--rate-scale", "1,1"]),
        ("rate-scale=empty", "refuse", ["--rate-scale", ""]),
        ("rate-scale=x", "refuse", ["--rate-scale", "x"]),
        ("seeds=-1", "refuse", ["--seeds", "-1"]),
        ("seeds=0", "refuse", ["--seeds", "0"]),
        ("seeds=1e9", "refuse", ["--seeds", str(10**9)]),
        ("jobs=0", "refuse", ["--jobs", "0"]),
        ("jobs=1e6", "either", ["--jobs", str(10**6)]),
        ("gamma-max=0", "refuse", ["--gamma-max", "0"]),
        ("gamma-max=99", "refuse", ["--gamma-max", "99"]),
        ("max-num-seqs=0", "refuse", ["--max-num-seqs", "0"]),
        ("max-model-len=1", "refuse", ["--max-model-len", "1"]),
        ("max-model-len=30-refuse", "refuse", ["--max-model-len", "30"]),
        ("max-model-len=45-skip", "ok", ["--max-model-len", "45", "--on-unfit", "skip"]),
        ("offload=on,on", "refuse", ["--offload", "on,on"]),
        ("offload=yes", "refuse", ["--offload", "yes"]),
        ("reload=migrate", "ok", ["--reload", "migrate"]),
        ("reload=migrate-offload=off", "refuse", ["--reload", "migrate", "--offload", "off"]),
        ("slo-ttft=nan", "refuse", ["--slo-ttft", "nan"]),
        ("slo-ttft=0", "refuse", ["--slo-ttft", "0"]),
        ("prior=scale:0", "refuse", ["--prior", "scale:0"]),
        ("prior=bogus", "refuse", ["--prior", "bogus"]),
        ("policy=fixed:9", "refuse", ["--policy", "fixed:9"]),
        ("policy=dsd-prior-none", "refuse", ["--policy", "dsd", "--prior", "none"]),
        ("ray=bogus", "refuse", ["--ray", "127.0.0.1:1"]),
        ("ray=garbage", "refuse", ["--ray", "not an address"]),
        ("trace=typo", "refuse", ["--trace", "burstt"]),
    ]
    # What the error must name where it is not the first flag (the value the user typed).
    named = {"policy=fixed:9": "fixed:9", "policy=dsd-prior-none": "dsd",
             "trace=typo": "burstt", "max-model-len=30-refuse": "--on-unfit skip",
             "max-model-len=1": "--max-model-len", "reload=migrate-offload=off": "--offload"}
    for name, expect, extra in sw:
        base = ["--trace", str(f.trace)] if "--trace" not in extra else []
        pol = ["--policy", "nospec"] if "--policy" not in extra else []
        mention = named.get(name, next((a for a in extra if a.startswith("--")), None))
        argv = _sweep(f, f.out_dir(f"sweep-flag/{name}"), *base, *pol, *extra)
        add("flag-sweep", name, expect, argv, mention=mention, timeout=60)
    unfit = fx.write_json(f.root / "traces" / "unfit.json", {"requests": [
        {"arrival_s": 0, "prompt_tokens": 40, "output_tokens": 4},
        {"arrival_s": 0.1, "prompt_tokens": 10**7, "output_tokens": 4}]})
    add("flag-sweep", "unfit-trace", "refuse",
        _sweep(f, f.out_dir("sweep-flag/unfit"), "--trace", str(unfit), "--policy", "nospec"),
        mention="--on-unfit")
    add("flag-sweep", "unfit-trace-skip", "ok",
        _sweep(f, f.out_dir("sweep-flag/unfit-skip"), "--trace", str(unfit), "--policy",
               "nospec", "--on-unfit", "skip"))
    configs = {
        "unknown-key": 'trace = ["burst"]\nbogus = 1\n',
        "trace-int": "trace = 3\n",
        "seeds-string": 'seeds = "x"\n',
        "rate-scale-zero": "rate_scale = [0]\n",
        "slo-string": 'slo_ttft = "1"\n',
        "offload-bool": "offload = [true, false]\n",
        "nested-table": "[sweep]\n[sweep.inner]\nx = 1\n",
        "deep-array": "trace = " + "[" * 5000 + "]" * 5000 + "\n",
        "huge-int": "seeds = 1" + "0" * 30 + "\n",
        "policy-empty-list": "policy = []\n",
        "max-model-len-zero": "max_model_len = [0]\n",
        "jobs-key": "jobs = 4\n",
        "on-unfit-bogus": 'on_unfit = "maybe"\n',
        "on-unfit-list": 'on_unfit = ["skip"]\n',
    }
    for name, text in configs.items():
        path = f.root / "configs" / f"{name}.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        expect = "ok" if name == "offload-bool" else "refuse"
        argv = _sweep(f, f.out_dir(f"sweep-config/{name}"), "--config", str(path),
                      *(["--trace", str(f.trace), "--policy", "nospec"]
                        if name not in ("trace-int", "unknown-key", "deep-array",
                                        "policy-empty-list") else []))
        add("flag-sweep", f"config/{name}", expect, argv, timeout=60)

    # nightjar validate
    for name, expect, extra in [
        ("gamma-max=0", "refuse", ["--gamma-max", "0"]),
        ("gamma-max=4-on-3", "refuse", ["--profile", str(_gamma3_profile(f)), "--gamma-max",
                                        "4"]),
        ("max-num-seqs=0", "refuse", ["--max-num-seqs", "0"]),
        ("max-num-batched-tokens=-1", "refuse", ["--max-num-batched-tokens", "-1"]),
        ("seed=-1", "refuse", ["--seed", "-1"]),
        ("draft-kv=bogus", "refuse", ["--draft-kv", "bogus"]),
        ("profile=missing", "refuse", ["--profile", "nope"]),
    ]:
        prof = [] if "--profile" in extra else ["--profile", fx.A100]
        gm = [] if "--gamma-max" in extra else ["--gamma-max", "3"]
        add("flag-validate", name, expect,
            ["validate", "--live-run", str(f.run), *prof, *gm, *extra])

    # nightjar profile
    roof = ["profile", "--roofline", "--gpu", "a100-80gb", "--model", "vicuna-13b",
            "--draft", "vicuna-68m"]
    prof_flags = [
        ("gpu=nope", "refuse", ["--gpu", "nope"]),
        ("model=nope", "refuse", ["--model", "nope"]),
        ("tp=0", "refuse", ["--tp", "0"]), ("tp=-1", "refuse", ["--tp", "-1"]),
        ("tp=3", "refuse", ["--tp", "3"]), ("tp=1000", "refuse", ["--tp", "1000"]),
        ("tp=2", "ok", ["--tp", "2"]),
        ("block-size=0", "refuse", ["--block-size", "0"]),
        ("block-size=2**40", "refuse", ["--block-size", str(2**40)]),
        ("block-size=7", "either", ["--block-size", "7"]),
        ("gmu=0", "refuse", ["--gpu-memory-utilization", "0"]),
        ("gmu=1.5", "refuse", ["--gpu-memory-utilization", "1.5"]),
        ("gmu=nan", "refuse", ["--gpu-memory-utilization", "nan"]),
        ("gmu=1e-9", "refuse", ["--gpu-memory-utilization", "1e-9"]),
        ("blocks-override=0", "refuse", ["--num-gpu-blocks-override", "0"]),
        ("blocks-override=2**62", "refuse", ["--num-gpu-blocks-override", str(2**62)]),
        ("blocks-no-draft-below-override", "refuse", ["--num-gpu-blocks-override", "4000",
                                                      "--num-gpu-blocks-no-draft", "3000"]),
        ("blocks-ok", "ok", ["--num-gpu-blocks-override", "3000",
                             "--num-gpu-blocks-no-draft", "4000"]),
        ("max-model-len=0", "refuse", ["--max-model-len", "0"]),
        ("max-model-len=1", "either", ["--max-model-len", "1"]),
        ("max-model-len=2**62", "either", ["--max-model-len", str(2**62)]),
        ("reserve=-1", "refuse", ["--activation-reserve-bytes", "-1"]),
        ("reserve=2**70", "refuse", ["--activation-reserve-bytes", str(2**70)]),
        ("verify-attention=bogus", "refuse", ["--verify-attention", "bogus"]),
        ("variant=../x", "refuse", ["--variant", "../x"]),
        ("variant=empty", "refuse", ["--variant", ""]),
        ("gpu-spec-inline-zero", "refuse", ["--gpu", None, "--gpu-spec",
                                            "bf16_tflops=0,memory_bandwidth_gb_s=1,"
                                            "memory_gib=1,host_link_gb_s=1"]),
        ("gpu-spec-inline-eq", "refuse", ["--gpu", None, "--gpu-spec", "="]),
        ("gpu-spec-inline-huge", "refuse", ["--gpu", None, "--gpu-spec",
                                            "bf16_tflops=1e308,memory_bandwidth_gb_s=1e308,"
                                            "memory_gib=1e308,host_link_gb_s=1e308"]),
        ("gpu-spec-and-gpu", "refuse", ["--gpu-spec", str(f.gpu)]),
    ]
    for name, expect, extra in prof_flags:
        argv = list(roof)
        if extra and extra[0] in ("--gpu", "--model") and extra[1] is not None:
            argv[argv.index(extra[0]) + 1] = extra[1]
            extra = extra[2:]
        elif extra and extra[0] == "--gpu" and extra[1] is None:
            i = argv.index("--gpu")
            del argv[i:i + 2]
            extra = extra[2:]
        out = f"{f.out_dir(f'profile-flag/{name}')}.json"
        add("flag-profile", name, expect, [*argv, *[x for x in extra if x is not None],
                                           "--out", out])
    for name, expect, extra in [
        ("show-context-nan", "refuse", ["--context", "nan"]),
        ("show-context-neg", "refuse", ["--context", "-1"]),
        ("show-context-inf", "refuse", ["--context", "inf"]),
        ("show-unknown", "refuse", ["--show", "nope"]),
        ("show-gamma-profile", "ok", ["--show", str(_gamma3_profile(f))]),
        ("list", "ok", ["--list"]),
        ("nothing", "refuse", []),
        ("model-config-without-roofline", "refuse", ["--model-config", str(f.model)]),
    ]:
        show = [] if "--show" in extra or name in ("list", "nothing") or "--model-config" in \
            extra else ["--show", fx.A100]
        add("flag-profile", name, expect, ["profile", *show, *extra])
    # Fitting from runs: the fixture run is simulated (refused: its steps are prices).
    fitted = f"{f.out_dir('profile-flag/from-run')}.json"
    for name, expect, extra, mention in [
        ("from-run-simulated", "refuse", ["--from-run", str(f.run), "--base", fx.A100,
                                          "--out", fitted], "simulated"),
        ("from-run-no-base", "refuse", ["--from-run", str(f.run), "--out", fitted], "--base"),
        ("from-run-no-out", "refuse", ["--from-run", str(f.run), "--base", fx.A100], "--out"),
        ("from-run-bad-base", "refuse", ["--from-run", str(f.run), "--base", "nope",
                                         "--out", fitted], "nope"),
        ("from-run-out-is-base", "refuse", ["--from-run", str(f.run), "--base",
                                            str(f.profile), "--out", str(f.profile),
                                            "--force"], "input"),
        ("from-run-empty", "refuse", ["--from-run"], None),
        ("base-without-from-run", "refuse", ["--base", fx.A100], "--from-run"),
        ("from-run-and-show", "refuse", ["--from-run", str(f.run), "--show", fx.A100], None),
        # The measured profiler's batch cap, checked before vLLM is looked for.
        *[(f"measured-max-num-seqs-{n}", "refuse", ["--model", str(f.model), "--max-num-seqs",
                                                   n, "--out", fitted], "--max-num-seqs")
          for n in ("0", "1000000000", "x")],
    ]:
        add("flag-profile", name, expect, ["profile", *extra], mention)

    # nightjar export: a run folder as vLLM benchmark results
    exported = str(f.out_dir("export"))
    for name, expect, extra, mention in [
        ("run", "ok", [str(f.run), "--out", exported + "-ok"], None),
        ("missing-folder", "refuse", [str(f.root / "nope"), "--out", exported + "-m"], "nope"),
        ("trace-not-folder", "refuse", [str(f.trace), "--out", exported + "-t"], None),
        ("out-is-the-run", "refuse", [str(f.run), "--out", str(f.run), "--force"], "overlaps"),
        ("out-inside-the-run", "refuse", [str(f.run), "--out", str(f.run / "x")], "overlaps"),
        ("bad-format", "refuse", [str(f.run), "--format", "csv", "--out", exported + "-f"],
         "--format"),
        ("no-out", "refuse", [str(f.run)], "--out"),
    ]:
        add("flag-export", name, expect, ["export", *extra], mention)

    # nightjar trace gen / show / import
    out = f.out_dir("gen")
    gen = [
        ("rate=0", "refuse", ["--rate", "0", "--duration", "3"]),
        ("rate=-1", "refuse", ["--rate", "-1", "--duration", "3"]),
        ("rate=nan", "refuse", ["--rate", "nan", "--duration", "3"]),
        ("rate=inf", "refuse", ["--rate", "inf", "--duration", "3"]),
        ("rate=1e300", "refuse", ["--rate", "1e300", "--duration", "3"]),
        ("duration=0", "refuse", ["--rate", "1", "--duration", "0"]),
        ("duration=nan", "refuse", ["--rate", "1", "--duration", "nan"]),
        ("duration=inf", "refuse", ["--rate", "1", "--duration", "inf"]),
        ("duration=1e300", "refuse", ["--rate", "1e-300", "--duration", "1e300"]),
        ("burstiness=0", "refuse", ["--rate", "1", "--duration", "3", "--burstiness", "0"]),
        ("burstiness=nan", "refuse", ["--rate", "1", "--duration", "3", "--burstiness", "nan"]),
        ("segments=empty", "refuse", ["--segments", ""]),
        ("segments=comma", "refuse", ["--segments", ","]),
        ("segments=4-fields", "refuse", ["--segments", "1:2:3:4"]),
        ("segments=words", "refuse", ["--segments", "a:b"]),
        ("segments=huge", "refuse", ["--segments", "1e300:1e300"]),
        ("segments=ok", "ok", ["--segments", "2:2,4:1:0.5"]),
        ("seed=-1", "refuse", ["--rate", "1", "--duration", "3", "--seed", "-1"]),
        ("seed=2**64", "refuse", ["--rate", "1", "--duration", "3", "--seed", str(2**64)]),
        ("workload=nope", "refuse", ["--rate", "1", "--duration", "3", "--workload", "nope"]),
        ("name-newline", "either", ["--rate", "1", "--duration", "3", "--name", "a\nb"]),
        ("both", "refuse", ["--rate", "1", "--duration", "3", "--segments", "1:2"]),
        ("none", "refuse", []),
    ]
    for name, expect, extra in gen:
        add("flag-trace", f"gen/{name}", expect,
            ["trace", "gen", *extra, "--out", f"{out}-{name.replace('/', '_')}.json"])
    for name, expect, extra in [
        ("window=0", "refuse", ["--window", "0"]), ("window=-1", "refuse", ["--window", "-1"]),
        ("window=nan", "refuse", ["--window", "nan"]), ("window=inf", "refuse",
                                                         ["--window", "inf"]),
        ("window=1e-300", "refuse", ["--window", "1e-300"]),
        ("seed=-1", "refuse", ["--seed", "-1"]), ("seed=2**64", "refuse", ["--seed", str(2**64)]),
        ("bundled", "ok", []),
    ]:
        add("flag-trace", f"show/{name}", expect, ["trace", "show", "burst", *extra])
    sharegpt = fx.make_kind(f.root, fx.FileArg("sharegpt", ".json",
                                               lambda r: json.dumps(fx.SHAREGPT) + "\n"), "plain")
    azure = fx.make_kind(f.root, fx.FileArg("azure", ".csv", lambda r: fx.AZURE), "plain")
    vllm = fx.make_kind(f.root, fx.FileArg("vllm", ".jsonl", lambda r: fx.VLLM_JSONL), "plain")
    imp = [
        ("azure", azure, "limit=0", "refuse", ["--limit", "0"]),
        ("azure", azure, "limit=-1", "refuse", ["--limit", "-1"]),
        ("azure", azure, "start=-1", "refuse", ["--start", "-1"]),
        ("azure", azure, "start=nan", "refuse", ["--start", "nan"]),
        ("azure", azure, "duration=0", "refuse", ["--duration", "0"]),
        ("azure", azure, "duration=nan", "refuse", ["--duration", "nan"]),
        ("azure", azure, "workload=nope", "refuse", ["--workload", "nope"]),
        ("azure", azure, "start-after-end", "refuse", ["--start", "1000"]),
        ("sharegpt", sharegpt, "rate=0", "refuse", ["--rate", "0"]),
        ("sharegpt", sharegpt, "rate=nan", "refuse", ["--rate", "nan"]),
        ("sharegpt", sharegpt, "rate=-1", "refuse", ["--rate", "-1"]),
        ("sharegpt", sharegpt, "burstiness=0", "refuse", ["--burstiness", "0"]),
        ("sharegpt", sharegpt, "seed=-1", "refuse", ["--seed", "-1"]),
        ("sharegpt", sharegpt, "tokenizer-missing", "refuse", ["--tokenizer", "/nope/x"]),
        ("sharegpt", sharegpt, "rate=1e-300", "refuse", ["--rate", "1e-300"]),
        ("vllm", vllm, "output-len=0", "refuse", ["--output-len", "0"]),
        ("vllm", vllm, "output-len=-1", "refuse", ["--output-len", "-1"]),
        ("vllm", vllm, "output-len=2**62", "refuse", ["--output-len", str(2**62)]),
        ("vllm", vllm, "rate=nan", "refuse", ["--rate", "nan"]),
        ("vllm", vllm, "limit=0", "refuse", ["--limit", "0"]),
    ]
    for kind, path, name, expect, extra in imp:
        add("flag-trace", f"import-{kind}/{name}", expect,
            ["trace", "import", kind, str(path), *extra, "--out",
             f"{f.out_dir(f'import-flag/{kind}-{name}')}.json"])
    # nightjar live, without vLLM in this environment or with it: flags that need nothing
    # on disk are checked first.
    for name, extra in [("time-scale=0", ["--time-scale", "0"]),
                        ("time-scale=nan", ["--time-scale", "nan"]),
                        ("gamma-max=-1", ["--gamma-max", "-1"]),
                        ("max-requests=0", ["--max-requests", "0"]),
                        ("slo=nan", ["--slo-ttft", "nan"]),
                        ("model-missing", ["--model", "/nope"]),
                        ("kv-cache-gb=-1", ["--kv-cache-gb", "-1"]),
                        ("tp=0", ["--tensor-parallel-size", "0"])]:
        model = [] if "--model" in extra else ["--model", "/nope"]
        add("flag-live", name, "refuse", ["live", *model, "--trace", str(f.trace), *extra])
    # Junk at the top level.
    for name, argv in [("empty", []), ("unknown-command", ["fly"]), ("dash", ["-"]),
                       ("sim-unknown-flag", ["sim", "--bogus"]),
                       ("nul-arg", ["sim", "--trace", "a\x01b"])]:
        add("flag-top", name, "refuse", argv)
    return cases


def _gamma3_profile(f: Fixtures) -> Path:
    doc = dict(f.profile_doc)
    doc["decode"] = [r for r in doc["decode"] if r[1] <= 3]
    return fx.write_json(f.root / "profiles" / "gamma3.json", doc)


# -- the Python API ----------------------------------------------------------------------


def api_cases(f: Fixtures) -> list[Case]:
    ok, refuse, either = "ok", "refuse", "either"
    sim = "nightjar.simulate(F['trace'], None, 'nospec', oracle=False"
    calls: list[tuple[str, str, str]] = [
        ("simulate-none", refuse, "nightjar.simulate(None)"),
        ("simulate-int", refuse, "nightjar.simulate(3)"),
        ("simulate-bytes", refuse, "nightjar.simulate(b'burst')"),
        ("simulate-path", ok, "import pathlib; nightjar.simulate(pathlib.Path(F['trace']),"
                              " None, 'nospec', oracle=False)"),
        ("simulate-profile-int", refuse, "nightjar.simulate(F['trace'], 3)"),
        ("simulate-profile-dict", refuse, "nightjar.simulate(F['trace'], {})"),
        ("simulate-profile-path", ok, "import pathlib; nightjar.simulate(F['trace'],"
                                      " pathlib.Path(F['profile']), 'nospec', oracle=False)"),
        ("simulate-policies-none-item", refuse, "nightjar.simulate(F['trace'], None, [None])"),
        ("simulate-policies-int", refuse, "nightjar.simulate(F['trace'], None, 3)"),
        ("simulate-policies-empty", refuse, "nightjar.simulate(F['trace'], None, [])"),
        ("simulate-policies-bytes", refuse, "nightjar.simulate(F['trace'], None, b'nospec')"),
        ("simulate-policies-set", either, "nightjar.simulate(F['trace'], None, {'nospec'})"),
        ("simulate-policies-gen", either, "nightjar.simulate(F['trace'], None,"
                                          " (p for p in ['nospec']))"),
        ("simulate-policies-dict", refuse, "nightjar.simulate(F['trace'], None, {'a': 1})"),
        ("offload-off", ok, f"{sim}, offload='off')"),
        ("offload-on", either, f"{sim}, offload='on')"),
        ("offload-yes", refuse, f"{sim}, offload='yes')"),
        ("offload-1", refuse, f"{sim}, offload=1)"),
        ("offload-none", refuse, f"{sim}, offload=None)"),
        ("offload-np-bool", ok, f"import numpy as np; {sim}, offload=np.bool_(False))"),
        ("oracle-no", refuse, "nightjar.simulate(F['trace'], None, 'nospec', oracle='no')"),
        ("oracle-0", refuse, "nightjar.simulate(F['trace'], None, 'nospec', oracle=0)"),
        ("seed-true", refuse, f"{sim}, seed=True)"),
        ("seed-float", refuse, f"{sim}, seed=1.0)"),
        ("seed-str", refuse, f"{sim}, seed='1')"),
        ("seed-np-int", ok, f"import numpy as np; {sim}, seed=np.int64(3))"),
        ("seed-negative", refuse, f"{sim}, seed=-1)"),
        ("seed-huge", refuse, f"{sim}, seed=2**64)"),
        ("gamma-max-str", refuse, f"{sim}, gamma_max='3')"),
        ("gamma-max-0", refuse, f"{sim}, gamma_max=0)"),
        ("gamma-max-9", refuse, f"{sim}, gamma_max=9)"),
        ("gamma-max-float", refuse, f"{sim}, gamma_max=3.0)"),
        ("prior-none", refuse, f"{sim}, prior=None)"),
        ("prior-int", refuse, f"{sim}, prior=3)"),
        ("prior-scale-0", refuse, f"{sim}, prior='scale:0')"),
        ("prior-profile-object", either, f"{sim}, prior=nightjar.load_profile(F['profile']))"),
        ("draft-kv-bogus", refuse, f"{sim}, draft_kv='bogus')"),
        ("draft-kv-none", refuse, f"{sim}, draft_kv=None)"),
        ("acceptance-bogus", refuse, f"{sim}, acceptance='bogus')"),
        ("reload-migrate-offload-auto", ok, f"{sim}, reload='migrate')"),
        ("reload-migrate-offload-off", refuse, f"{sim}, reload='migrate', offload='off')"),
        ("engine-V1", refuse, f"{sim}, engine='V1')"),
        ("max-num-seqs-0", refuse, f"{sim}, max_num_seqs=0)"),
        ("max-num-seqs-str", refuse, f"{sim}, max_num_seqs='8')"),
        ("max-num-seqs-huge", ok, f"{sim}, max_num_seqs=2**62)"),
        ("max-num-batched-tokens-neg", refuse, f"{sim}, max_num_batched_tokens=-1)"),
        ("max-model-len-0", refuse, f"{sim}, max_model_len=0)"),
        ("max-model-len-float", refuse, f"{sim}, max_model_len=100.0)"),
        ("max-model-len-short", refuse, f"{sim}, max_model_len=30)"),
        ("on-unfit-bogus", refuse, f"{sim}, on_unfit='bogus')"),
        ("on-unfit-true", refuse, f"{sim}, on_unfit=True)"),
        ("slo-ttft-neg", refuse, f"{sim}, slo_ttft=-1)"),
        ("slo-ttft-nan", refuse, f"{sim}, slo_ttft=float('nan'))"),
        ("slo-ttft-str", refuse, f"{sim}, slo_ttft='1')"),
        ("slo-ttft-none", refuse, f"{sim}, slo_ttft=None)"),
        ("slo-tpot-0", refuse, f"{sim}, slo_tpot=0)"),
        ("slo-tpot-bool", refuse, f"{sim}, slo_tpot=True)"),
        ("unknown-kwarg", refuse, f"{sim}, bogus=1)"),
        ("trace-typo", refuse, "nightjar.simulate('burstt')"),
        ("profile-typo", refuse, "nightjar.simulate(F['trace'], 'a100')"),
        ("results-frame-none", refuse, "nightjar.results_frame(None)"),
        ("results-frame-int", refuse, "nightjar.results_frame(3)"),
        ("results-frame-str", refuse, "nightjar.results_frame('x')"),
        ("results-frame-list-junk", refuse, "nightjar.results_frame([1, 2])"),
        ("results-frame-empty", either, "nightjar.results_frame([])"),
        ("results-frame-slo-neg", refuse, f"nightjar.results_frame({sim}), slo=-1)"),
        ("results-frame-slo-str", refuse, f"nightjar.results_frame({sim}), slo='x')"),
        ("results-frame-slo-tuple", either, f"nightjar.results_frame({sim}), slo=(1, 0.1))"),
        ("results-frame-ok", ok, f"nightjar.results_frame({sim}))"),
        ("results-getitem-missing", either, f"{sim})['nope']"),
        ("results-write-none", refuse, f"{sim}).write(None)"),
        ("results-write-int", refuse, f"{sim}).write(3)"),
        ("results-write-force-str", refuse, f"{sim}).write(F['out'] + '/w1', force='no')"),
        ("results-write-report-str", refuse, f"{sim}).write(F['out'] + '/w2', report='no')"),
        ("results-ctor-junk", refuse, "nightjar.Results([1, 2])"),
        ("results-ctor-slo-junk", refuse, "nightjar.Results([], slo=3)"),
        ("load-run-none", refuse, "nightjar.load_run(None)"),
        ("load-run-int", refuse, "nightjar.load_run(3)"),
        ("load-run-ok", ok, "nightjar.load_run(F['run'])"),
        ("load-sweep-none", refuse, "nightjar.load_sweep(None)"),
        ("load-sweep-run-folder", refuse, "nightjar.load_sweep(F['run'])"),
        ("sweep-figures-none", refuse, "nightjar.sweep_figures(None)"),
        ("sweep-figures-empty", refuse, "import pandas as pd; nightjar.sweep_figures("
                                        "pd.DataFrame())"),
        ("sweep-figures-junk", refuse, "import pandas as pd; nightjar.sweep_figures("
                                       "pd.DataFrame({'a': [1]}))"),
        ("run-sweep-out-none", refuse, "nightjar.run_sweep(None, trace=[F['trace']])"),
        ("run-sweep-jobs-0", refuse, "nightjar.run_sweep(F['out'] + '/rs1', jobs=0,"
                                     " trace=[F['trace']], policy=['nospec'])"),
        ("run-sweep-jobs-str", refuse, "nightjar.run_sweep(F['out'] + '/rs2', jobs='2',"
                                       " trace=[F['trace']], policy=['nospec'])"),
        ("run-sweep-trace-int", refuse, "nightjar.run_sweep(F['out'] + '/rs3', trace=3)"),
        ("run-sweep-bogus-key", refuse, "nightjar.run_sweep(F['out'] + '/rs4', bogus=1)"),
        ("run-sweep-offload-off-str", ok, "nightjar.run_sweep(F['out'] + '/rs5',"
                                          " trace=[F['trace']], policy=['nospec'],"
                                          " offload='off', report=False)"),
        ("run-sweep-force-str", refuse, "nightjar.run_sweep(F['out'] + '/rs6', force='yes',"
                                        " trace=[F['trace']], policy=['nospec'])"),
        ("run-sweep-ray-int", refuse, "nightjar.run_sweep(F['out'] + '/rs7', ray=3,"
                                      " trace=[F['trace']], policy=['nospec'])"),
        ("run-sweep-unfit", refuse, "nightjar.run_sweep(F['out'] + '/rs8', trace=[F['unfit']],"
                                    " policy=['nospec'])"),
        ("run-sweep-seeds-huge", refuse, "nightjar.run_sweep(F['out'] + '/rs9', seeds=10**9,"
                                         " trace=[F['trace']], policy=['nospec'])"),
        ("trace-segments-none", refuse, "nightjar.Trace.from_segments(None)"),
        ("trace-segments-short", refuse, "nightjar.Trace.from_segments([(1,)])"),
        ("trace-segments-strings", refuse, "nightjar.Trace.from_segments([('a', 'b')])"),
        ("trace-segments-str", refuse, "nightjar.Trace.from_segments('1:2')"),
        ("trace-segments-seed-neg", refuse, "nightjar.Trace.from_segments([(1, 2)], seed=-1)"),
        ("trace-segments-seed-float", refuse, "nightjar.Trace.from_segments([(1, 2)], seed=1.5)"),
        ("trace-segments-name-int", refuse, "nightjar.Trace.from_segments([(1, 2)], name=3)"),
        ("trace-segments-workload-none", refuse, "nightjar.Trace.from_segments([(1, 2)],"
                                                 " workload=None)"),
        ("trace-segments-ok", ok, "nightjar.Trace.from_segments([(2, 3)], seed=1)"),
        ("trace-requests-none", refuse, "nightjar.Trace.from_requests(None)"),
        ("trace-requests-int", refuse, "nightjar.Trace.from_requests(3)"),
        ("trace-requests-empty-dict", refuse, "nightjar.Trace.from_requests([{}])"),
        ("trace-requests-str-items", refuse, "nightjar.Trace.from_requests(['ab'])"),
        ("trace-requests-df-nan", refuse, "import pandas as pd, math; nightjar.Trace"
                                          ".from_requests(pd.DataFrame({'arrival_s': [0.0],"
                                          " 'prompt_tokens': [math.nan], 'output_tokens': [3]}))"),
        ("trace-requests-df-ok", ok, "import pandas as pd; nightjar.Trace.from_requests("
                                     "pd.DataFrame({'arrival_s': [0.0, 1.0], 'prompt_tokens':"
                                     " [5, 6], 'output_tokens': [3, 2]}))"),
        ("trace-requests-epoch", refuse, "nightjar.Trace.from_requests([{'arrival_s': 1.7e9,"
                                         " 'prompt_tokens': 5, 'output_tokens': 2}])"),
        ("trace-ctor-junk", refuse, "import numpy as np; nightjar.Trace('x', 0, np.array([]),"
                                    " np.array([]), np.array([]), np.array([]), np.array([]))"),
        ("load-trace-none", refuse, "nightjar.load_trace(None)"),
        ("load-trace-int", refuse, "nightjar.load_trace(3)"),
        ("load-trace-seed-neg", refuse, "nightjar.load_trace('burst', seed=-1)"),
        ("load-trace-seed-str", refuse, "nightjar.load_trace('burst', seed='1')"),
        ("load-trace-path", ok, "import pathlib; nightjar.load_trace(pathlib.Path(F['trace']))"),
        ("load-profile-none", refuse, "nightjar.load_profile(None)"),
        ("load-profile-int", refuse, "nightjar.load_profile(3)"),
        ("load-profile-path", ok, "import pathlib; nightjar.load_profile("
                                  "pathlib.Path(F['profile']))"),
        ("load-profile-dict", refuse, "nightjar.load_profile({})"),
        ("getattr-unknown", either, "nightjar.bogus"),
    ]
    protocol = {"getattr-unknown": ("AttributeError",), "results-getitem-missing": ("KeyError",),
                "unknown-kwarg": ("TypeError",)}
    return [Case(f"api/{name}", "api", expect, code=code, raises=protocol.get(name, ()))
            for name, expect, code in calls]


def all_cases(f: Fixtures) -> list[Case]:
    from tools.hostile.causes import cause_cases  # it builds on this module's helpers

    cases = [*file_cases(f), *out_cases(f), *force_cases(f), *profile_cases(f), *trace_cases(f),
             *flag_cases(f), *api_cases(f), *cause_cases(f)]
    ids = [c.id for c in cases]
    dup = {i for i in ids if ids.count(i) > 1}
    if dup:
        raise ValueError(f"duplicate case ids: {sorted(dup)[:5]}")
    return cases


def fixtures_for_api(f: Fixtures) -> dict[str, str]:
    return {"trace": str(f.trace), "profile": str(f.profile), "run": str(f.run),
            "out": str(f.out), "unfit": str(f.root / "traces" / "unfit.json")}


__all__ = ["Case", "Fixtures", "all_cases", "fixtures_for_api", "math"]
