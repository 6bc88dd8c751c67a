"""Cases for the causes issue 40 named (and the fixes since): sizes that once allocated
or looped without bound, an output onto its own input, a dataset given as a trace, a
sweep file that says one axis twice. Each would have been a traceback, a hang, a lost
file or a silent wrong table before its fix."""

from __future__ import annotations

import json

from tools.hostile.cases import SIM, Case, Fixtures


def cause_cases(f: Fixtures) -> list[Case]:
    trace = str(f.trace)
    sharegpt = f.root / "in" / "sharegpt.json"
    sharegpt.write_text(json.dumps([{"id": "a", "conversations": [
        {"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"}]}]),
        encoding="utf-8")
    twice = f.root / "in" / "twice.toml"
    twice.write_text(f'trace = "{trace}"\npolicy = ["nospec"]\npolicies = ["fixed:1"]\n',
                     encoding="utf-8")
    own = f.root / "in" / "own-trace.json"
    own.write_text(f.trace.read_text(encoding="utf-8"), encoding="utf-8")
    bench = ["bench", "live", "--model", "/nope", "--trace", trace]
    cli: list[tuple[str, str, list[str], str | None]] = [
        ("sim-max-num-seqs-1e9", "ok",
         [*SIM, "--no-oracle", "--policy", "nospec", "--trace", trace, "--max-num-seqs",
          str(10**9), "--out", str(f.out_dir("cause/sim-seats"))], None),
        ("sim-rate-scale-denormal", "refuse",
         [*SIM, "--trace", trace, "--rate-scale", "5e-324",
          "--out", str(f.out_dir("cause/rate"))], "rate scale"),
        ("sim-sharegpt-as-trace", "refuse",
         [*SIM, "--trace", str(sharegpt), "--out", str(f.out_dir("cause/sharegpt"))],
         "trace import sharegpt"),
        ("schedule-out-onto-its-trace", "refuse",
         ["schedule", "--trace", str(own), "--out", str(own)], "--out"),
        ("schedule-seeds-1e9", "refuse", ["schedule", "--trace", trace, "--seeds", str(10**9)],
         "--seeds"),
        ("bench-cores-huge", "refuse", [*bench, "--cores", "0-30000000"], "core"),
        ("bench-kv-cache-gb-inf", "refuse", [*bench, "--kv-cache-gb", "inf"], "--kv-cache-gb"),
        ("sweep-axis-twice", "refuse",
         ["sweep", "--config", str(twice), "--out", str(f.out_dir("cause/twice"))],
         "same axis"),
    ]
    cases = [Case(f"cause/{name}", "cause", expect, argv=argv, mention=mention)
             for name, expect, argv, mention in cli]
    api = [
        ("trace-head-fraction", "refuse", "nightjar.load_trace(F['trace']).head(2.5)"),
        ("trace-numpy-seed", "ok",
         "nightjar.load_trace('steady', seed=__import__('numpy').int64(3))"),
    ]
    cases += [Case(f"api/cause-{name}", "api", expect, code=code) for name, expect, code in api]
    return cases
