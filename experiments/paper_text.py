"""Everything ``reports/paper/`` says, written from the rows: tables.md, the README's
generated blocks (setup, the paper's claims with verdicts, goal check, priors,
ablations, correction, run) and index.html.

Statistics: every cell is the mean over seeds with its 95% t interval
(:func:`nightjar.results.stats.mean_interval`). A comparison of two runs is *paired*:
per seed, the relative difference ``a / b - 1`` on the same arrivals and acceptance
rates, then its mean and 95% interval. "A beats B" is written only where that paired
interval excludes 0 in A's favour (the paired intervals separate from no difference);
"ties" where it includes 0. A paper's figure F is *reached* by a run whose paired
interval includes F or lies beyond it, and *missed* where the whole interval falls
short of it.

The README keeps its hand-written prose (method and caveats, no numbers) outside the
``<!-- generated: NAME -->`` ... ``<!-- end: NAME -->`` blocks; :func:`render_readme`
rewrites the blocks only, and ``tests/test_paper_report.py`` fails when the committed
README differs from a rewrite from the committed rows.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import paper_cells as pc  # the sibling script in this folder
from nightjar.profile.profile import load_profile
from nightjar.report.colors import policy_colors
from nightjar.results.stats import Interval, mean_interval

Row = dict[str, float | str]
Key = tuple[str, str, str]  # section, trace, profile

# The paper's headline figures, as the paper states them.
PAPER_THROUGHPUT_PCT = 27.29  # throughput over standard SD (fixed:3), dynamic loads
PAPER_LATENCY_PCT = -20.18  # mean latency against no speculation
PAPER_OFFLOAD_TOK_S = 6315.0  # throughput with offloading at 35 req/s
PAPER_TTFT_PCT = -47.2  # TTFT with offloading against without, at 35 req/s

SHORT = {p: p.split("/")[0] for p in (*pc.OURS, *pc.PAPER)}


def profile_name(profile: str) -> str:
    return SHORT.get(profile, profile)


# -- statistics -------------------------------------------------------------------------


def by_key(rows: Sequence[Row]) -> dict[Key, list[Row]]:
    out: dict[Key, list[Row]] = {}
    for r in rows:
        out.setdefault((str(r["section"]), str(r["trace"]), str(r["profile"])), []).append(r)
    return out


def interval(rows: Iterable[Row], run: str, metric: str) -> Interval:
    return mean_interval([float(r[metric]) for r in rows if r["run"] == run])


def paired(rows: Sequence[Row], run: str, base: str, metric: str) -> Interval:
    """Per-seed relative difference ``run / base - 1`` in percent, over seeds."""
    a = {r["seed"]: float(r[metric]) for r in rows if r["run"] == run}
    b = {r["seed"]: float(r[metric]) for r in rows if r["run"] == base}
    return mean_interval([(a[s] / b[s] - 1.0) * 100.0 for s in a if s in b and b[s] > 0])


def fmt(iv: Interval, f: str = "{:.1f}", signed: bool = False) -> str:
    if not math.isfinite(iv.mean):
        return "-"
    text = iv.format(f)
    return ("+" + text) if signed and iv.mean >= 0 else text


def signed(value: float, f: str = "{:.1f}") -> str:
    return ("+" if value >= 0 else "") + f.format(value)


def verdict(rows: Sequence[Row], a: str, b: str, metric: str, higher: bool) -> str:
    """``>`` / ``<`` where ``a`` is better / worse than ``b`` with separated intervals."""
    ia, ib = interval(rows, a, metric), interval(rows, b, metric)
    if ia.n < 2 or ib.n < 2:
        return "?"
    better = ia.lo > ib.hi if higher else ia.hi < ib.lo
    worse = ia.hi < ib.lo if higher else ia.lo > ib.hi
    return ">" if better else ("<" if worse else "~")


def paired_verdict(rows: Sequence[Row], a: str, b: str, metric: str, higher: bool) -> str:
    """``>`` where ``a`` beats ``b`` (the paired interval excludes 0 in its favour),
    ``<`` where it loses, ``~`` where they tie."""
    iv = paired(rows, a, b, metric)
    if iv.n < 2 or not math.isfinite(iv.lo):
        return "?"
    if iv.lo > 0:
        return ">" if higher else "<"
    if iv.hi < 0:
        return "<" if higher else ">"
    return "~"


def against(iv: Interval, target: float, higher: bool) -> str:
    """How an interval stands against a paper's figure: missed, reached or beyond."""
    if higher:
        return "missed" if iv.hi < target else ("beyond" if iv.lo > target else "reached")
    return "missed" if iv.lo > target else ("beyond" if iv.hi < target else "reached")


# -- tables.md --------------------------------------------------------------------------


def policy_table(rows: Sequence[Row]) -> list[str]:
    runs = list(dict.fromkeys(str(r["run"]) for r in rows))
    head = ("| run | tok/s | vs fixed:3 % | mean E2E s | E2E vs nospec % | mean TTFT s "
            "| bound gap % | gain vs static % | mean gamma | switches | toggles |")
    out = [head, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    has_f3, has_ns = "fixed:3" in runs, "nospec" in runs
    for run in runs:
        vs_f3 = paired(rows, run, "fixed:3", "throughput_tok_s") if has_f3 else None
        vs_ns = paired(rows, run, "nospec", "e2e_s_mean") if has_ns else None
        out.append(
            f"| {run} | {fmt(interval(rows, run, 'throughput_tok_s'))} | "
            f"{fmt(vs_f3, signed=True) if vs_f3 else '-'} | "
            f"{fmt(interval(rows, run, 'e2e_s_mean'), '{:.2f}')} | "
            f"{fmt(vs_ns, signed=True) if vs_ns else '-'} | "
            f"{fmt(interval(rows, run, 'ttft_s_mean'), '{:.3f}')} | "
            f"{fmt(interval(rows, run, 'regret_bound_pct'), '{:.2f}')} | "
            f"{fmt(interval(rows, run, 'gain_static_pct'), '{:.2f}')} | "
            f"{fmt(interval(rows, run, 'mean_gamma'), '{:.2f}')} | "
            f"{fmt(interval(rows, run, 'gamma_switches'), '{:.0f}')} | "
            f"{fmt(interval(rows, run, 'gamma_toggles'), '{:.0f}')} |"
        )
    return out


def command_lines(section: str, trace: str, profile: str, seeds: int) -> list[str]:
    cmds = pc.commands(section, trace, profile, seeds)
    what = "this table" if len(cmds) == 1 else f"this table ({len(cmds)} commands, one per" \
        " prior / offload setting; only the one with the oracle gives the step-oracle column)"
    return [f"Re-run {what}:", "", "```", *cmds, "```"]


GOAL_PAIRS = (("nightjar+", "nightjar-code"), ("nightjar+ +offload", "nightjar-code +offload"))


def goal_rivals(rows: Sequence[Row], ours: str) -> list[str]:
    """The runs ``ours`` is compared with on the same memory footing (no oracle)."""
    runs = [str(r) for r in dict.fromkeys(x["run"] for x in rows)]
    return [r for r in runs if r not in ("oracle", ours) and not r.startswith("nightjar+")
            and (ours.endswith("+offload") or not r.endswith("+offload"))]


def goal_lines(keyed: dict[Key, list[Row]]) -> list[str]:
    """nightjar+ vs every other non-oracle run, per dynamic table."""
    out = [
        "| trace | profile | ours | tok/s: runs above ours | E2E: runs below ours "
        "| vs port tok/s | vs port E2E | vs port tok/s %, paired | vs port E2E %, paired |",
        "|---|---|---|---|---|---:|---:|---:|---:|",
    ]
    for (section, trace, profile), rows in keyed.items():
        if section != "dynamic":
            continue
        runs = {str(x["run"]) for x in rows}
        for ours, port in GOAL_PAIRS:
            if ours not in runs:
                continue
            others = goal_rivals(rows, ours)
            above = [r for r in others if verdict(rows, r, ours, "throughput_tok_s", True) == ">"]
            below = [r for r in others if verdict(rows, r, ours, "e2e_s_mean", False) == ">"]
            out.append(
                f"| {trace} | {profile} | {ours} | {', '.join(above) or 'none'} "
                f"| {', '.join(below) or 'none'} "
                f"| {verdict(rows, ours, port, 'throughput_tok_s', True)} "
                f"| {verdict(rows, ours, port, 'e2e_s_mean', False)} "
                f"| {fmt(paired(rows, ours, port, 'throughput_tok_s'), signed=True)} "
                f"| {fmt(paired(rows, ours, port, 'e2e_s_mean'), signed=True)} |"
            )
    return out


def correction_table(rows: Sequence[Row]) -> list[str]:
    cols = [k for k in rows[0] if k.startswith("excess_")]
    names = [f"steps {k.split('_')[1]}-{k.split('_')[2]}" for k in cols]
    out = ["| B | prior | " + " | ".join(names) + " |", "|---:|---|" + "---:|" * len(cols)]
    keys = list(dict.fromkeys((int(r["batch_size"]), str(r["prior"])) for r in rows))
    for b, prior in keys:
        mine = [r for r in rows if r["batch_size"] == b and r["prior"] == prior]
        cells = [fmt(mean_interval([float(r[k]) for r in mine]), "{:.2f}") for k in cols]
        out.append(f"| {b} | {prior} | " + " | ".join(cells) + " |")
    return out


CORRECTION_COMMAND = "python experiments/paper.py --only correction --out DIR --seeds {seeds}"
TITLES = {
    "dynamic": "Dynamic traces", "priors": "What nightjar+ and dsd believe (priors)",
    "offload": f"Offload at {pc.OFFLOAD_RATE:g} req/s",
    "table6": f"Table 6: {pc.TABLE6_REQUESTS} prompts at {pc.TABLE6_RATE:g} req/s",
    "ablation": "nightjar-code ablations: the gate or the bandit?",
}


def tables_md(rows: Sequence[Row], corr: Sequence[Row], seeds: int) -> str:
    keyed = by_key(rows)
    parts = [
        "# Generated tables (experiments/paper.py)",
        "",
        f"Mean ± 95% t half-width over {seeds} seeds. `vs fixed:3` and `E2E vs nospec` are "
        "paired per seed (the same arrivals and acceptance rates), then averaged. "
        f"gamma_max = {pc.GAMMA_MAX}. `switches`: decode steps whose gamma differs from the "
        "previous one's; `toggles`: those that turn speculation on or off.",
        "",
        "## Goal check: is any run better than nightjar+ with separated intervals?",
        "",
        *goal_lines(keyed),
        "",
        "`>` ours better than the port on the same memory footing with separated "
        "intervals, `~` overlap, `<` worse.",
        "",
    ]
    for section, title in TITLES.items():
        parts += [f"## {title}", ""]
        for (sec, trace, profile), sub in keyed.items():
            if sec != section:
                continue
            parts += [f"### {trace} / {profile}", "", *policy_table(sub), "",
                      *command_lines(section, trace, profile, seeds), ""]
    parts += [
        "## Correcting a wrong table (synthetic loop)", "",
        "Excess per-token cost (%) of nightjar+'s decisions over the best gamma's, by "
        "window of decisions.", "", *correction_table(corr), "",
        "Re-run this table:", "", "```", CORRECTION_COMMAND.format(seeds=seeds), "```", "",
    ]
    return "\n".join(parts) + "\n"


# -- the README's generated blocks ------------------------------------------------------


@dataclass(frozen=True)
class Data:
    rows: Sequence[Row]
    corr: Sequence[Row]
    meta: dict[str, Any]

    @property
    def keyed(self) -> dict[Key, list[Row]]:
        return by_key(self.rows)

    @property
    def seeds(self) -> int:
        return len({r["seed"] for r in self.rows})

    def table(self, section: str, trace: str, profile: str) -> list[Row]:
        return self.keyed.get((section, trace, profile), [])


def _command(d: Data, section: str, trace: str, profile: str) -> list[str]:
    cmds = pc.commands(section, trace, profile, d.seeds)
    return [f"One table ({trace} on {profile_name(profile)}), re-run:", "", "```",
            *cmds, "```"]


def _cells(d: Data, cells: Sequence[tuple[str, str, str]], run: str,
           measure: Callable[[list[Row]], Interval]) -> list[Interval]:
    out = []
    for section, trace, profile in cells:
        rows = d.table(section, trace, profile)
        if any(r["run"] == run for r in rows):
            out.append(measure(rows))
    return out


def _spread(ivs: Sequence[Interval], target: float, higher: bool, f: str = "{:+.1f}"
            ) -> str:
    if not ivs:
        return "-"
    means = [iv.mean for iv in ivs]
    where = [against(iv, target, higher) for iv in ivs]
    counts = ", ".join(f"{where.count(w)} {w}" for w in ("missed", "reached", "beyond")
                       if where.count(w))
    lo, hi = min(means), max(means)
    span = f.format(lo) if lo == hi else f"{f.format(lo)} to {f.format(hi)}"
    return f"{span} ({len(ivs)} tables: {counts})"


def _plain(ivs: Sequence[Interval], target: float, higher: bool) -> str:
    if not ivs:
        return "not run"
    where = [against(iv, target, higher) for iv in ivs]
    hit = len(where) - where.count("missed")
    if hit == len(where):
        return "**reproduced**"
    if hit == 0:
        return "**not reproduced**"
    return f"**partly** ({hit} of {len(where)} tables)"


FORMS = (
    ("nightjar", "the paper's bandit, from its text"),
    ("nightjar-code", "the paper's bandit, its published code"),
    ("nightjar +offload", "from its text, with elastic draft memory"),
    ("nightjar-code +offload", "its code, with elastic draft memory"),
    ("nightjar+", "ours"),
    ("nightjar+ +offload", "ours, with elastic draft memory"),
)


# Static bars next to each relative claim: what a gain over the bar would be without
# any adaptivity (a row of context, not a claim of the paper).
CONTEXT = {"fixed:3": (("nospec", "no speculation, no draft loaded"),
                       ("fixed:1", "the best static gamma here")),
           "nospec": (("fixed:1", "the best static gamma here"),
                      ("fixed:3", "the paper's standard SD"))}


def _relative_claim(d: Data, claim: str, target: float, base: str, metric: str,
                    higher: bool) -> list[str]:
    paper = [("dynamic", t, p) for p in pc.PAPER for t in pc.PAPER_DYNAMIC]
    ours = [("dynamic", t, p) for p in pc.OURS for t in pc.DYNAMIC]
    out = []
    for run, who in CONTEXT[base]:
        def bar(rows: list[Row], run: str = run) -> Interval:
            return paired(rows, run, base, metric)

        out.append(f"| {claim} | `{run}` ({who}: context) | "
                   f"{_spread(_cells(d, paper, run, bar), target, higher)} | "
                   f"{_spread(_cells(d, ours, run, bar), target, higher)} | a bar, not a claim |")
    for run, who in FORMS:
        def measure(rows: list[Row], run: str = run) -> Interval:
            return paired(rows, run, base, metric)

        here, there = _cells(d, paper, run, measure), _cells(d, ours, run, measure)
        if not here and not there:
            continue
        out.append(f"| {claim} | `{run}` ({who}) | {_spread(here, target, higher)} | "
                   f"{_spread(there, target, higher)} | {_plain(here, target, higher)} |")
    return out


def _offload_claims(d: Data) -> list[str]:
    paper = [("offload", "steady35", pc.PAPER[1])]
    ours = [("offload", "steady35", pc.OURS[1])]

    def cells(where: list[tuple[str, str, str]], run: str,
              measure: Callable[[list[Row]], Interval], f: str, unit: str) -> str:
        ivs = _cells(d, where, run, measure)
        return "; ".join(f"{fmt(iv, f, signed=unit == '%')}{unit}" for iv in ivs) or "-"

    out = []
    for run, who in FORMS:
        if not run.endswith("+offload"):
            continue

        def absolute(rows: list[Row], run: str = run) -> Interval:
            return interval(rows, run, "throughput_tok_s")

        ivs = _cells(d, paper, run, absolute)
        ratio = (f" (the paper's figure is {PAPER_OFFLOAD_TOK_S / ivs[0].mean:.1f}x ours)"
                 if ivs else "")
        out.append(f"| {PAPER_OFFLOAD_TOK_S:.0f} tok/s at {pc.OFFLOAD_RATE:g} req/s with "
                   f"offloading | `{run}` ({who}) | "
                   f"{cells(paper, run, absolute, '{:.0f}', ' tok/s')} | "
                   f"{cells(ours, run, absolute, '{:.0f}', ' tok/s')} | "
                   f"{_plain(ivs, PAPER_OFFLOAD_TOK_S, True)}{ratio} |")
    for run, who in FORMS[:2] + FORMS[4:5]:
        def ttft(rows: list[Row], run: str = run) -> Interval:
            return paired(rows, f"{run} +offload", run, "ttft_s_mean")

        ivs = _cells(d, paper, f"{run} +offload", ttft)
        out.append(f"| TTFT {PAPER_TTFT_PCT:+.1f}% with offloading at {pc.OFFLOAD_RATE:g} "
                   f"req/s, paired % | `{run} +offload` against `{run}` ({who}) | "
                   f"{cells(paper, f'{run} +offload', ttft, '{:.1f}', '%')} | "
                   f"{cells(ours, f'{run} +offload', ttft, '{:.1f}', '%')} | "
                   f"{_plain(ivs, PAPER_TTFT_PCT, False)} |")
    return out


def _table6_claims(d: Data) -> list[str]:
    out = []
    for run, who in (FORMS[0], FORMS[1], FORMS[4]):
        texts = []
        plain = ""
        for profiles in (pc.PAPER, pc.OURS):
            tally: dict[str, dict[str, int]] = {"tok/s": {}, "E2E": {}}
            for p in profiles:
                for w in pc.TABLE6_WORKLOADS:
                    rows = d.table("table6", f"table6-{w}", p)
                    for base in pc.TABLE6_BASELINES:
                        for name, metric, higher in (("tok/s", "throughput_tok_s", True),
                                                     ("E2E", "e2e_s_mean", False)):
                            v = paired_verdict(rows, run, base, metric, higher)
                            tally[name][v] = tally[name].get(v, 0) + 1
            n = sum(tally["tok/s"].values())
            texts.append("; ".join(
                f"{name}: beats {t.get('>', 0)}, ties {t.get('~', 0)}, loses {t.get('<', 0)}"
                for name, t in tally.items()) + f" (of {n})")
            if profiles == pc.PAPER:
                beats = tally["tok/s"].get(">", 0)
                plain = ("**reproduced**" if beats == n else "**not reproduced**" if beats == 0
                         else f"**partly** (beats on throughput in {beats} of {n})")
        out.append(f"| Table 6: ahead of DSD, BanditSpec and TETRIS | `{run}` ({who}) | "
                   f"{texts[0]} | {texts[1]} | {plain} |")
    return out


def block_claims(d: Data) -> list[str]:
    head = ["| the paper's claim | run | paper-config profiles (the paper's setting) "
            "| our profiles | verdict (paper's setting) |", "|---|---|---|---|---|"]
    lines = [
        *head,
        *_relative_claim(d, f"throughput {PAPER_THROUGHPUT_PCT:+.2f}% over standard SD "
                         "(`fixed:3`), paired %", PAPER_THROUGHPUT_PCT, "fixed:3",
                         "throughput_tok_s", True),
        *_relative_claim(d, f"mean latency {PAPER_LATENCY_PCT:+.2f}% against no speculation"
                         " (`nospec`), paired %", PAPER_LATENCY_PCT, "nospec", "e2e_s_mean",
                         False),
        *_offload_claims(d),
        *_table6_claims(d),
        "",
        "Throughput and latency: the dynamic ShareGPT traces on the paper-config profiles"
        f" ({len(pc.PAPER) * len(pc.PAPER_DYNAMIC)} tables) and every dynamic trace on ours;"
        " offload: the steady load on the RTX 4090 profiles (the paper's and ours: the"
        " draft holds memory worth moving only there); Table 6: per-seed paired"
        f" verdicts against each of {', '.join(pc.TABLE6_BASELINES)} on"
        f" {len(pc.TABLE6_WORKLOADS)} workloads per profile.",
        "",
        *_command(d, "dynamic", "burst", pc.PAPER[0]),
        "",
        *_command(d, "offload", "steady35", pc.PAPER[1]),
        "",
        *_command(d, "table6", "table6-sharegpt", pc.PAPER[0]),
    ]
    return lines


def block_goal(d: Data) -> list[str]:
    out = []
    for ours, port in GOAL_PAIRS:
        tables = [(k, rows) for k, rows in d.keyed.items()
                  if k[0] == "dynamic" and any(r["run"] == ours for r in rows)]
        beaten = []
        better = {"throughput_tok_s": 0, "e2e_s_mean": 0}
        worse = {"throughput_tok_s": 0, "e2e_s_mean": 0}
        for (_, trace, profile), rows in tables:
            rivals = goal_rivals(rows, ours)
            hits = [f"{r} on {m}" for r in rivals for m, metric, higher in
                    (("throughput", "throughput_tok_s", True), ("mean E2E", "e2e_s_mean", False))
                    if verdict(rows, r, ours, metric, higher) == ">"]
            if hits:
                beaten.append(f"{trace} / {profile_name(profile)} ({', '.join(hits)})")
            for metric, higher in (("throughput_tok_s", True), ("e2e_s_mean", False)):
                v = verdict(rows, ours, port, metric, higher)
                better[metric] += v == ">"
                worse[metric] += v == "<"
        n = len(tables)
        lead = (f"- `{ours}` is beaten with separated intervals on {len(beaten)} of {n} "
                "dynamic tables" + (f": {'; '.join(beaten)}." if beaten else "."))
        out += [lead,
                f"  Against `{port}` (the same memory footing) it is better with separated "
                f"intervals on throughput in {better['throughput_tok_s']} and on mean E2E in "
                f"{better['e2e_s_mean']} of {n} tables, worse in "
                f"{worse['throughput_tok_s']} and {worse['e2e_s_mean']}."]
    return [*out, "", *_command(d, "dynamic", "oscillation", pc.OURS[1])]


def block_priors(d: Data) -> list[str]:
    labels = ["nightjar+", "nightjar+ @scale:0.7", "nightjar+ @scale:1.3",
              "nightjar+ @spec-scale:0.7",
              "nightjar+ @none", "dsd", "dsd @spec-scale:0.7"]
    out = ["| table | metric | " + " | ".join(f"`{x}`" for x in labels) + " |",
           "|---|---|" + "---:|" * len(labels)]
    for trace in pc.PRIOR_TRACES:
        metric, name, f = (("throughput_tok_s", "tok/s", "{:.0f}") if trace == "burst"
                           else ("e2e_s_mean", "mean E2E s", "{:.2f}"))
        for profile in pc.OURS:
            rows = d.table("priors", trace, profile)
            cells = [f"{fmt(interval(rows, x, metric), f)} (bound gap "
                     f"{fmt(interval(rows, x, 'regret_bound_pct'), signed=True)}%)" for x in labels]
            out.append(f"| {trace} / {profile_name(profile)} | {name} | " + " | ".join(cells)
                       + " |")
    regrets = {x: [interval(d.table("priors", t, p), x, "regret_bound_pct").mean
                   for t in pc.PRIOR_TRACES for p in pc.OURS] for x in labels}
    out += ["", "Mean bound gap (per-token latency over the best gamma schedule on each run's"
            " own batches and KV pool: conditional on them, a diagnostic), over these four"
            " tables: " + "; ".join(
        f"`{x}` {signed(min(v))} to {signed(max(v))}%" for x, v in regrets.items()) + ".",
        "", *_command(d, "priors", "burst", pc.OURS[0])]
    return out


def block_ablation(d: Data) -> list[str]:
    labels = [r[0] for r in pc.ABLATION_RUNS if r[0] != "oracle"]
    out = ["| table | metric | " + " | ".join(f"`{x}`" for x in labels) + " |",
           "|---|---|" + "---:|" * len(labels)]
    notes: dict[str, list[str]] = {x: [] for x in labels[1:]}
    for trace in pc.ABLATION_TRACES:
        metric, name, f, higher = (("throughput_tok_s", "tok/s", "{:.0f}", True)
                                   if trace == "burst"
                                   else ("e2e_s_mean", "mean E2E s", "{:.2f}", False))
        for profile in pc.OURS:
            rows = d.table("ablation", trace, profile)
            cells = [fmt(interval(rows, x, metric), f) for x in labels]
            out.append(f"| {trace} / {profile_name(profile)} | {name} | " + " | ".join(cells)
                       + " |")
            for x in labels[1:]:
                v = paired_verdict(rows, x, labels[0], metric, higher)
                word = {">": "better", "<": "worse", "~": "a tie"}.get(v, "?")
                iv = paired(rows, x, labels[0], metric)
                notes[x].append(f"{trace} / {profile_name(profile)} {word} "
                                f"({name.split()[-2] if ' ' in name else name} "
                                f"{fmt(iv, signed=True)}%)")
    lines = [f"- `{x}` against the port, paired: " + "; ".join(v) + "." for x, v in notes.items()]
    return [*out, "", *lines, "", *_command(d, "ablation", "alpaca-burst", pc.OURS[1])]


def block_correction(d: Data) -> list[str]:
    return [*correction_table(d.corr), "", "Re-run this table:", "", "```",
            CORRECTION_COMMAND.format(seeds=d.seeds), "```"]


def block_setup(d: Data) -> list[str]:
    out = [f"- **Seeds.** {d.seeds} per table (0..{d.seeds - 1}); gamma_max = "
           f"{pc.GAMMA_MAX}; every run `--engine {pc.ENGINE} --draft-kv {pc.DRAFT_KV}`.",
           "- **Profiles** (KV blocks with / without the draft; max_model_len: a longer "
           "prompt is skipped, `--on-unfit skip`, an answer stops there, as in vLLM):"]
    for p in (*pc.OURS, *pc.PAPER):
        mem = load_profile(p).memory
        pin = f", max_model_len {mem.max_model_len}" if mem.max_model_len else ""
        out.append(f"  - `{p}`: {mem.kv_blocks(True)} / {mem.kv_blocks(False)}{pin}")
    out.append("- **Traces.** Dynamic: " + ", ".join(f"`{t}`" for t in pc.DYNAMIC)
               + " (bundled), the ShareGPT ones also on the paper-config profiles.")
    for name, spec in pc.TRACE_SPECS.items():
        out.append(f"  - `{pc.trace_arg(name)}`: {spec['description']}.")
    for column, what in (("rejected_requests", "Skipped requests** (prompts longer than "
                          "a pinned window)"),
                         ("capped_requests", "Answers stopped at max_model_len**")):
        worst: dict[str, int] = {}
        for r in d.rows:
            n = int(float(r.get(column, 0) or 0))
            worst[str(r["profile"])] = max(worst.get(str(r["profile"]), 0), n)
        if any(worst.values()):
            out.append(f"- **{what}, the most in one run: " + ", ".join(
                f"{profile_name(p)} {n}" for p, n in worst.items() if n) + ".")
    return out


def block_run(d: Data) -> list[str]:
    m = d.meta
    if not m:
        return ["(no run record)"]
    return [f"The current rows took {float(m['minutes']):.1f} minutes of wall time with "
            f"{m['jobs']} workers ({m['started']} to {m['finished']} UTC), "
            f"{m['computed']} groups computed and {m['cached']} taken from the cache."]


BLOCKS: dict[str, Callable[[Data], list[str]]] = {
    "run": block_run, "setup": block_setup, "claims": block_claims, "goal": block_goal,
    "priors": block_priors, "correction": block_correction, "ablation": block_ablation,
}
MARK = re.compile(r"<!-- generated: (\w+) -->\n.*?<!-- end: \1 -->", re.DOTALL)


def render_readme(text: str, rows: Sequence[Row], corr: Sequence[Row],
                  meta: dict[str, Any]) -> str:
    """``text`` with every generated block rewritten from the rows."""
    d = Data(rows, corr, meta)
    seen: list[str] = []

    def fill(m: re.Match[str]) -> str:
        name = m.group(1)
        if name not in BLOCKS:
            raise ValueError(f"README: unknown generated block {name!r}")
        seen.append(name)
        body = "\n".join(BLOCKS[name](d))
        return f"<!-- generated: {name} -->\n{body}\n<!-- end: {name} -->"

    out = MARK.sub(fill, text)
    missing = sorted(set(BLOCKS) - set(seen))
    if missing:
        raise ValueError(f"README: no generated block {missing[0]!r}")
    return out


def prose(text: str) -> str:
    """The README without its generated blocks (what is written by hand)."""
    return MARK.sub("", text)


# -- index.html -------------------------------------------------------------------------


def _inline(text: str) -> str:
    """Escaped text with Markdown's **bold** and `code`."""
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def md_to_html(md: str, runs: Sequence[str] = ()) -> str:
    """Just enough Markdown (headings, tables, code blocks, paragraphs) for a
    self-contained page; a table row whose first cell is a run gets its colour."""
    colors = policy_colors(runs)
    body: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("<!--"):
            i += 1
            continue
        if line.startswith("```"):
            block = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                block.append(lines[i])
                i += 1
            body.append(f"<pre>{html.escape(chr(10).join(block))}</pre>")
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            body.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line.startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip() for c in lines[i].strip("|").split("|")])
                i += 1
            head, data = rows[0], rows[2:]
            body.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head)
                        + "</tr>")
            for r in data:
                cells = [_inline(c) for c in r]
                if r and r[0] in colors:
                    cells[0] = (f"<span class='sw' style='background:{colors[r[0]]}'></span>"
                                + cells[0])
                body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
            body.append("</table>")
            continue
        elif line.strip():
            para = [line.strip()]
            while (i + 1 < len(lines) and lines[i + 1].strip() and not lines[i + 1].startswith(
                    ("#", "|", "```", "<!--", "- ", "  - ")) and not re.match(r"\d+\. ",
                                                                         lines[i + 1])):
                i += 1
                para.append(lines[i].strip())
            body.append(f"<p>{_inline(' '.join(para))}</p>")
        i += 1
    style = ("body{font-family:sans-serif;max-width:1100px;margin:2em auto}"
             "table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}"
             ".sw{display:inline-block;width:10px;height:10px;margin-right:6px;"
             "border-radius:2px}pre{white-space:pre-wrap}")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Nightjar paper "
            f"reproduction</title><style>{style}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")
