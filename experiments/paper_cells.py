"""The cells of the paper reproduction (``experiments/paper.py``): what runs where, how
one group of runs is simulated, and the ``nightjar sim`` command that re-runs it.

A *group* is one trace on one profile at one seed: every run in it sees the same
arrivals and per-request acceptance rates. A *table* is a group over every seed. Each
run is simulated through :class:`nightjar.run.config.RunConfig`, exactly as ``nightjar sim``
runs it, so the command printed under each table (:func:`commands`) reproduces its
rows: ``nightjar sim --seeds N`` re-draws a generative trace with its file seed + i and
simulates with seed i, as :func:`make_trace` and :func:`run_group` do.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightjar.profile.profile import load_profile
from nightjar.results.alternatives import is_static
from nightjar.results.metrics import summarize
from nightjar.results.regret import bound_regret_pct, per_token_latency, regret
from nightjar.run.config import RunConfig
from nightjar.sim import OnUnfit, simulate_many
from nightjar.trace.trace import Trace, load_trace

ROOT = Path(__file__).resolve().parent.parent
TRACES = Path("reports/paper/traces")  # relative to the repository root, as commands run

GAMMA_MAX = 3  # the paper's MAX_SPECULATIVE_LEN
ENGINE = "v0"  # the paper's engine: vLLM v0, prefill-only steps
DRAFT_KV = "skip"  # ... which skips the draft at gamma 0 and rebuilds its KV later
# Every run serves only the prompts that fit its model's window and skips the others,
# as the paper's benchmark keeps only those (table6-specbench holds four prompts past
# vicuna-13b's 2048 tokens, on our A100 profile as on the paper's).
ON_UNFIT = "skip"
OURS = ("a100-80gb/vicuna-13b+vicuna-68m", "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b")
PAPER = (
    "a100-80gb-paper/vicuna-13b+vicuna-68m",
    "rtx4090-paper/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b",
)
RTX_PAIR = (OURS[1], PAPER[1])
DYNAMIC = (
    "burst", "oscillation", "migration", "alpaca-burst", "alpaca-oscillation", "alpaca-migration",
)
PAPER_DYNAMIC = ("burst", "oscillation", "migration")  # the paper's traces are ShareGPT
TABLE6_WORKLOADS = ("sharegpt", "alpaca", "specbench")
TABLE6_REQUESTS, TABLE6_RATE = 200, 5.0
OFFLOAD_RATE = 35.0

# The traces this study makes, written to reports/paper/traces/ so a command can name
# them: the paper's Table-6 setting (the first 200 requests of a 5 req/s Poisson
# stream) per workload, and a steady 35 req/s ShareGPT load (the paper's offload test).
TRACE_SPECS: dict[str, dict[str, Any]] = {
    **{f"table6-{w}": {
        "format_version": 1, "name": f"table6-{w}", "seed": 600, "workload": w,
        "description": f"The paper's Table-6 setting: the first {TABLE6_REQUESTS} requests "
                       f"of a {TABLE6_RATE:g} req/s Poisson stream, {w} lengths",
        "max_requests": TABLE6_REQUESTS,
        "segments": [{"duration_s": 60, "rate_rps": TABLE6_RATE, "burstiness": 1.0}],
    } for w in TABLE6_WORKLOADS},
    "steady35": {
        "format_version": 1, "name": "steady35", "seed": 350, "workload": "sharegpt",
        "description": f"The paper's offload test: a steady {OFFLOAD_RATE:g} req/s "
                       "ShareGPT load for 60 s",
        "segments": [{"duration_s": 60, "rate_rps": OFFLOAD_RATE, "burstiness": 1.0}],
    },
}

# (label, policy spec, prior, offload)
Run = tuple[str, str, str, bool]
# Each table carries what its claim needs: the paper's bars (fixed:3 = "standard SD",
# nospec), the best fixed gamma (fixed:1 on the bundled dynamic traces), the paper's
# bandit in both forms (nightjar: its text; nightjar-code: its published code), ours
# and the yardstick; elastic memory only where the draft holds real memory (RTX 4090).
DYNAMIC_RUNS: tuple[Run, ...] = (
    ("nospec", "nospec", "exact", False),
    ("fixed:1", "fixed:1", "exact", False),
    ("fixed:3", "fixed:3", "exact", False),
    ("nightjar", "nightjar", "exact", False),
    ("nightjar-code", "nightjar-code", "exact", False),
    ("nightjar+", "nightjar+", "exact", False),
    ("oracle", "oracle", "exact", False),
)
OFFLOAD_EXTRA: tuple[Run, ...] = (
    ("nightjar +offload", "nightjar", "exact", True),
    ("nightjar-code +offload", "nightjar-code", "exact", True),
    ("nightjar+ +offload", "nightjar+", "exact", True),
)
# Added to the dynamic groups of PRIOR_TRACES on our profiles; reported with that
# group's nightjar+ and oracle under the "priors" section.
PRIOR_RUNS: tuple[Run, ...] = (
    ("nightjar+ @scale:0.7", "nightjar+", "scale:0.7", False),
    ("nightjar+ @scale:1.3", "nightjar+", "scale:1.3", False),
    ("nightjar+ @spec-scale:0.7", "nightjar+", "spec-scale:0.7", False),
    ("nightjar+ @none", "nightjar+", "none", False),
    ("dsd", "dsd", "exact", False),
    ("dsd @spec-scale:0.7", "dsd", "spec-scale:0.7", False),
)
PRIOR_SHARED = ("nightjar+", "oracle")
PRIOR_TRACES = ("burst", "alpaca-burst")
OFFLOAD_RUNS: tuple[Run, ...] = (
    ("nospec", "nospec", "exact", False),
    ("fixed:3", "fixed:3", "exact", False),
    ("nightjar", "nightjar", "exact", False),
    ("nightjar-code", "nightjar-code", "exact", False),
    ("nightjar+", "nightjar+", "exact", False),
    ("oracle", "oracle", "exact", False),
    *OFFLOAD_EXTRA,
)
TABLE6_BASELINES = ("dsd", "banditspec", "tetris")
TABLE6_RUNS: tuple[Run, ...] = tuple(
    (s, s, "exact", False)
    for s in (
        "nospec", "fixed:1", "fixed:2", "fixed:3", *TABLE6_BASELINES, "sglang",
        "nightjar", "nightjar-code", "nightjar+", "oracle",
    )
)
# Where the port's behaviour comes from: the hard gate, or the bandit (gamma 0 explorable).
ABLATION_RUNS: tuple[Run, ...] = (
    ("nightjar-code", "nightjar-code", "exact", False),
    ("nightjar-code:nogate", "nightjar-code:nogate", "exact", False),
    ("nightjar-code:allow0", "nightjar-code:allow0", "exact", False),
    ("nightjar-code:nogate,allow0", "nightjar-code:nogate,allow0", "exact", False),
    ("oracle", "oracle", "exact", False),
)
ABLATION_TRACES = ("burst", "alpaca-burst")
SECTIONS = ("dynamic", "priors", "offload", "table6", "ablation")


@dataclass(frozen=True, slots=True)
class Group:
    """One trace at one seed on one profile, and the runs that share its arrivals."""

    section: str
    trace: str  # a bundled trace or one of TRACE_SPECS
    profile: str
    seed: int
    runs: tuple[Run, ...]


def trace_arg(trace: str) -> str:
    """How ``nightjar sim --trace`` names the trace (run from the repository root)."""
    return str(TRACES / f"{trace}.json") if trace in TRACE_SPECS else trace


def write_traces(root: Path = ROOT) -> list[Path]:
    """Write (or refresh) the study's trace files; they are inputs, so committed."""
    folder = root / TRACES
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, spec in TRACE_SPECS.items():
        path = folder / f"{name}.json"
        text = json.dumps(spec, indent=1) + "\n"
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        out.append(path)
    return out


def make_trace(trace: str, seed: int) -> Trace:
    """Seed i re-draws a generative trace with its file seed + i (as ``--seeds``)."""
    name = str(ROOT / trace_arg(trace)) if trace in TRACE_SPECS else trace
    return load_trace(name, seed=load_trace(name).seed + seed)


def config(seed: int, specs: tuple[str, ...], prior: str, offload: bool) -> RunConfig:
    """The run configuration of one command of a table (the oracle only where asked)."""
    return RunConfig.build({
        "policies": specs, "seed": seed, "gamma_max": GAMMA_MAX, "engine": ENGINE,
        "draft_kv": DRAFT_KV, "prior": prior, "offload": offload,
        "on_unfit": ON_UNFIT, "oracle": False,
    })


def by_setting(runs: tuple[Run, ...]) -> dict[tuple[str, bool], list[Run]]:
    """Runs grouped by (prior, offload): one ``nightjar sim`` command each."""
    out: dict[tuple[str, bool], list[Run]] = {}
    for run in runs:
        out.setdefault((run[2], run[3]), []).append(run)
    return out


def run_group(g: Group) -> list[dict[str, float | str]]:
    """Every run of the group, one row per run (and per section it is reported in)."""
    trace = make_trace(g.trace, g.seed)
    profile = load_profile(g.profile)
    results = {}
    for (prior, offload), runs in by_setting(g.runs).items():
        cfg = config(g.seed, tuple(r[1] for r in runs), prior, offload)
        sims = simulate_many(trace, profile, [r[1] for r in runs], cfg.sim_config(profile.drafter),
                             on_unfit=OnUnfit(cfg.on_unfit), prior=cfg.prior)
        results.update({r[0]: res for r, res in zip(runs, sims, strict=True)})
    oracle = results.get("oracle")
    # The hindsight-best static run of the group (exact prior, no elastic memory).
    best_static = min((per_token_latency(results[r[0]]) for r in g.runs
                       if is_static(r[1]) and r[2] == "exact" and not r[3]), default=math.nan)
    prior_labels = {r[0] for r in PRIOR_RUNS}
    has_priors = g.section == "dynamic" and any(label in prior_labels for label in results)
    rows: list[dict[str, float | str]] = []
    for label, res in ((r[0], results[r[0]]) for r in g.runs):
        s = summarize(res)
        sections = [g.section]
        if has_priors and label in prior_labels:
            sections = ["priors"]
        elif has_priors and label in PRIOR_SHARED:
            sections = [g.section, "priors"]
        rows += [{
            "section": section, "trace": g.trace, "profile": g.profile, "seed": g.seed,
            "run": label, "throughput_tok_s": s.throughput_tok_s, "e2e_s_mean": s.e2e_s.mean,
            "ttft_s_mean": s.ttft_s.mean, "tpot_ms_mean": s.tpot_s.mean * 1e3,
            "preemptions": s.preemptions,
            "regret_bound_pct": bound_regret_pct(res),
            "gain_static_pct": (1.0 - per_token_latency(res) / best_static) * 100.0,
            "step_oracle_pct": regret(res, oracle).percent if oracle is not None else math.nan,
            "mean_gamma": s.mean_gamma, "gamma_switches": s.gamma_switches,
            "gamma_toggles": s.gamma_toggles, "offloads": int(res.extra.get("offloads", 0)),
            "rejected_requests": int(res.extra.get("rejected_requests", 0)),
            "capped_requests": int(res.extra.get("capped_requests", 0)),
            "requests": len(trace), "wall_s": res.extra.get("wall_s", math.nan),
        } for section in sections]
    return rows


def groups(seeds: int) -> list[Group]:
    out: list[Group] = []
    for seed in range(seeds):
        for profile in OURS:
            for trace in DYNAMIC:
                runs = DYNAMIC_RUNS + (OFFLOAD_EXTRA if profile in RTX_PAIR else ())
                runs += PRIOR_RUNS if trace in PRIOR_TRACES else ()
                out.append(Group("dynamic", trace, profile, seed, runs))
        for profile in PAPER:
            for trace in PAPER_DYNAMIC:
                runs = DYNAMIC_RUNS + (OFFLOAD_EXTRA if profile in RTX_PAIR else ())
                out.append(Group("dynamic", trace, profile, seed, runs))
        for profile in OURS + PAPER:
            for workload in TABLE6_WORKLOADS:
                out.append(Group("table6", f"table6-{workload}", profile, seed, TABLE6_RUNS))
        for profile in RTX_PAIR:
            out.append(Group("offload", "steady35", profile, seed, OFFLOAD_RUNS))
        for profile in OURS:
            for trace in ABLATION_TRACES:
                out.append(Group("ablation", trace, profile, seed, ABLATION_RUNS))
    # Longest first, so the pool's last jobs are short ones.
    cost = {"migration": 3.0, "burst": 2.0, "oscillation": 2.0, "steady35": 2.0}
    slow = {p: 2.0 for p in PAPER}  # small pools: many small steps
    return sorted(
        out, key=lambda g: -cost.get(g.trace, 1.0) * slow.get(g.profile, 1.0) * len(g.runs)
    )


def runs_of(section: str, trace: str, profile: str) -> tuple[Run, ...]:
    """The runs a table of ``section`` holds (the priors table: its own and the shared)."""
    if section == "priors":
        shared = tuple(r for r in DYNAMIC_RUNS if r[0] in PRIOR_SHARED)
        return shared + PRIOR_RUNS
    if section == "dynamic":
        runs = DYNAMIC_RUNS + (OFFLOAD_EXTRA if profile in RTX_PAIR else ())
        return runs
    return {"table6": TABLE6_RUNS, "offload": OFFLOAD_RUNS, "ablation": ABLATION_RUNS}[section]


def commands(section: str, trace: str, profile: str, seeds: int) -> list[str]:
    """The ``nightjar sim`` commands that re-run a table's rows, one per (prior, offload);
    the command with the oracle also gives the step-oracle column (the others:
    ``--no-oracle``); every run carries its regret vs the bound."""
    out = []
    for (prior, offload), runs in by_setting(runs_of(section, trace, profile)).items():
        specs = [r[1] for r in runs if r[1] != "oracle"]
        with_oracle = any(r[1] == "oracle" for r in runs)
        flags = [f"--trace {trace_arg(trace)}", f"--profile {profile}",
                 *(f"--policy {s}" for s in specs),
                 f"--gamma-max {GAMMA_MAX}", f"--engine {ENGINE}", f"--draft-kv {DRAFT_KV}"]
        flags += [f"--prior {prior}"] * (prior != "exact") + ["--offload on"] * offload
        flags += [f"--on-unfit {ON_UNFIT}"]
        flags += ["--no-oracle"] * (not with_oracle) + [f"--seeds {seeds}"]
        out.append("nightjar sim " + " ".join(flags))
    return out
