"""How far the simulator is from reality: replay a live run in the simulator.

A live run's folder (``nightjar live --out DIR``) holds each request's arrival,
lengths and measured acceptance. The validator rebuilds the trace from it, runs the
same policy in the simulator on a profile, and compares two things:

- the step-time model: every live pure-decode step's measured time against the
  profile's prediction at the same batch size, gamma and context length (no
  randomness involved, so this isolates the latency table);
- the end-to-end summary (throughput, TTFT, TPOT, E2E), which also includes the
  scheduler model and the acceptance draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import pandas as pd

from nightjar.core.acceptance import alpha_from_ratio
from nightjar.core.records import RunResult
from nightjar.errors import NightjarInputError
from nightjar.profile.profile import Profile
from nightjar.results.metrics import summarize
from nightjar.trace.trace import Trace

COMPARED = ("throughput_tok_s", "ttft_s_mean", "ttft_s_p99", "tpot_s_mean", "tpot_s_p99",
            "e2e_s_mean", "e2e_s_p99", "mean_batch_size", "acceptance", "preemptions")


def trace_of(run: RunResult) -> Trace:
    """The trace a run served, with each request's measured acceptance rate."""
    req = run.requests_frame().sort_values("arrival_s", kind="stable")
    drafted = req["drafted"].to_numpy(dtype=float)
    accepted = req["accepted"].to_numpy(dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(drafted > 0, accepted / drafted, np.nan)
    steps = run.steps_frame()
    spec = steps[steps["gamma"] > 0]
    mean_gamma = float(spec["drafted"].sum() / max(spec["batch_size"].sum(), 1))
    acceptance = alpha_from_ratio(ratio, max(mean_gamma, 1.0))
    n = len(req)
    try:
        return Trace(
            name=run.trace, seed=run.seed,
            arrival_s=req["arrival_s"].to_numpy(dtype=float),
            prompt_tokens=req["prompt_tokens"].to_numpy(dtype=np.int64),
            output_tokens=req["output_tokens"].to_numpy(dtype=np.int64),
            workload=np.array(["sharegpt"] * n, dtype=object),
            acceptance=acceptance, prompts=None,
        )
    except ValueError as exc:  # the run's requests break a trace invariant
        raise NightjarInputError(f"run {run.policy!r}: its requests are no trace ({exc})") from None


@dataclass(frozen=True)
class StepModelError:
    steps: int  # pure decode steps compared
    median_abs_pct: float
    mean_pct: float  # signed: > 0 means the profile predicts slower than measured
    by_bucket: pd.DataFrame  # batch-size bucket x gamma -> measured, predicted, error
    clamped: int = 0  # of the steps, those priced off the table's grid (Profile.off_grid)


def step_model_error(run: RunResult, profile: Profile) -> StepModelError:
    """Compare each pure decode step's time with the profile's prediction."""
    s = run.steps_frame()
    s = s[(s["batch_size"] > 0) & (s["prefill_tokens"] == 0) & (s["switch_cost_s"] == 0)]
    s = s[s["mean_context_len"].notna() & (s["gamma"] <= profile.gamma_max)]
    predicted = []
    clamped = 0
    for b, g, c in zip(s["batch_size"], s["gamma"], s["mean_context_len"], strict=True):
        # Off the grid is priced as the simulator prices it (Profile.clamp) and counted,
        # never dropped: short prompts under a 128..512 grid are common.
        clamped += profile.off_grid(int(b), float(c))
        predicted.append(profile.step_time_s(int(b), int(g), float(c)))
    s = s.assign(predicted_s=predicted)
    if s.empty:
        raise NightjarInputError(f"run {run.policy!r} has no pure decode steps to compare")
    err = 100.0 * (s["predicted_s"] / s["step_time_s"] - 1.0)
    bucket = pd.cut(s["batch_size"], [0, 1, 4, 16, 64, 256, 1 << 20],
                    labels=["1", "2-4", "5-16", "17-64", "65-256", "257+"])
    table = (
        s.assign(bucket=bucket, error_pct=err)
        .groupby(["bucket", "gamma"], observed=True)
        .agg(steps=("step_time_s", "size"), measured_ms=("step_time_s", "median"),
             predicted_ms=("predicted_s", "median"), error_pct=("error_pct", "median"))
        .reset_index()
    )
    table[["measured_ms", "predicted_ms"]] *= 1e3
    return StepModelError(
        len(s), float(err.abs().median()), float(err.mean()), table, clamped=clamped
    )


STEP_KINDS = ("decode", "mixed", "prefill")


def priced_steps(run: RunResult, profile: Profile, sync: bool) -> pd.DataFrame:
    """The run's steps (those that ran a batch or a prompt), each with the simulator's
    price of its composition: ``priced_s``, ``edge`` (priced at a table's edge),
    ``kind`` (``STEP_KINDS``), ``idle_s`` (the engine's idle time before the step,
    priced by the profile's wake table) and ``error_pct`` (priced against measured)."""
    from nightjar.policies.registry import spec_needs_draft
    from nightjar.sim.price import StepShape, price_step

    s = run.steps_frame()
    s = s[(s["batch_size"] > 0) | (s["prefill_tokens"] > 0)]
    # The engine's idle time before each step (the wake the profile prices): its start
    # less the previous step's end; the run's first step waited from before the run.
    idle = (s["time_s"] - (s["time_s"] + s["step_time_s"]).shift(1)).fillna(np.inf)
    # The K a live step proposed (its draft's passes at the end of the step, over the
    # prompts it prefilled too) is the one the next step verified (docs/live-internals.md, lag).
    proposed = s["gamma"].shift(-1).fillna(s["gamma"]).astype(int)
    # Prompts a prefill-only step completes: live, the tokens it emitted (each prompt's
    # first); the simulator's rows count decode tokens only, so there the requests whose
    # first token came at the step's end.
    done = s["emitted"]
    if run.engine != "live":
        proposed = s["gamma"]  # the simulator verifies a K in the step that chose it
        firsts = np.sort(run.requests_frame()["first_token_s"].dropna().to_numpy(dtype=float))
        ends = (s["time_s"] + s["step_time_s"]).to_numpy(dtype=float)
        tol = 1e-9 * np.maximum(np.abs(ends), 1.0)
        done = pd.Series(np.searchsorted(firsts, ends + tol, side="right")
                         - np.searchsorted(firsts, ends - tol, side="left"), index=s.index)
    s = s.assign(proposed=proposed, prompts_done=done, idle_s=idle.clip(lower=0.0))
    s = s[s["gamma"] <= profile.gamma_max]
    loaded = spec_needs_draft(run.policy)
    priced, edge = [], []
    for n, g, d, c, p, k, e, i in zip(s["batch_size"], s["gamma"], s["drafted"],
                                      s["mean_context_len"], s["prefill_tokens"],
                                      s["proposed"], s["prompts_done"], s["idle_s"],
                                      strict=True):
        price = price_step(profile, StepShape(
            n_decode=int(n), g_max=int(g), drafted=int(d), mean_ctx=float(c),
            prefill_tokens=int(p), draft_loaded=loaded, sync=sync,
            prompt_gamma=min(int(k), profile.gamma_max) if n == 0 else None,
            prompts_done=int(e) if n == 0 else 0, idle_s=float(i),
        ))
        priced.append(price.total_s)
        edge.append(price.off_grid)
    kind = np.where(s["prefill_tokens"] == 0, "decode",
                    np.where(s["batch_size"] > 0, "mixed", "prefill"))
    s = s.assign(priced_s=priced, edge=edge, kind=kind)
    return s.assign(error_pct=100.0 * (s["priced_s"] / s["step_time_s"] - 1.0))


def time_base(priced: pd.DataFrame) -> float:
    """A run's time base against the profile: the median live / priced ratio over its
    pure decode steps on the profile's grid (:func:`priced_steps`; no catch-up in them,
    none priced at or past a table's edge, where the price's own extrapolation would
    count as speed), NaN without any. Above 1 the machine ran the run slower than when
    the profile was measured."""
    decode = priced[(priced["kind"] == "decode") & (priced["switch_cost_s"] == 0)
                    & (priced["priced_s"] > 0) & ~priced["edge"].astype(bool)]
    if decode.empty:
        return math.nan
    return float((decode["step_time_s"] / decode["priced_s"]).median())


def step_replay(run: RunResult, profile: Profile, sync: bool) -> pd.DataFrame:
    """Every live step's composition priced by the simulator's price function
    (:func:`priced_steps`).

    Per kind of step (pure ``decode``; ``mixed``: decodes and prompt tokens in one
    step; ``prefill``: prompt tokens only): steps, their measured and priced total
    seconds, the error of the total, the median per-step error and |error|, and the
    steps priced at a table's edge. This isolates the step-price model from
    scheduling: the same steps, not the simulator's own.

    ``median_error_run_base_pct``: the median per-step error with every price put in
    the run's own time base, i.e. scaled by the median live/priced ratio of its pure
    decode steps. A machine that ran the whole run slower than when the profile was
    measured (load on a shared host) then drops out, and what is left is the shape
    of the price (how one kind of step is priced against another).
    """
    s = priced_steps(run, profile, sync)
    base = time_base(s)
    s = s.assign(run_error_pct=100.0 * (base * s["priced_s"] / s["step_time_s"] - 1.0))
    rows = []
    for k in STEP_KINDS:
        g = s[s["kind"] == k]
        if g.empty:
            continue
        live_s, sim_s = float(g["step_time_s"].sum()), float(g["priced_s"].sum())
        rows.append({"kind": k, "steps": len(g), "live_s": live_s, "priced_s": sim_s,
                     "total_error_pct": 100.0 * (sim_s / live_s - 1.0) if live_s else np.nan,
                     "median_error_pct": float(g["error_pct"].median()),
                     "median_abs_error_pct": float(g["error_pct"].abs().median()),
                     "median_error_run_base_pct": float(g["run_error_pct"].median()),
                     "at_edge": int(g["edge"].sum())})
    return pd.DataFrame(rows)


def compare_summaries(live: RunResult, sim: RunResult) -> pd.DataFrame:
    """One row per metric: live, sim, and the sim's error relative to live."""
    a, b = summarize(live).as_dict(), summarize(sim).as_dict()
    rows = []
    for key in COMPARED:
        lv, sv = float(a[key]), float(b[key])
        err = 100.0 * (sv / lv - 1.0) if lv and np.isfinite(lv) and np.isfinite(sv) else np.nan
        rows.append({"metric": key, "live": lv, "sim": sv, "error_pct": err})
    return pd.DataFrame(rows)


# What the agreement check reports per policy, besides the ranking: the terms a
# scheduler model decides (the per-step table is checked separately).
AGREEMENT = ("throughput_tok_s", "tpot_s_mean", "ttft_s_mean", "mean_batch_size", "e2e_s_mean")


@dataclass(frozen=True)
class Agreement:
    """Whether the simulator orders the policies as the engine did, and by how much
    each policy's scheduler-level metrics miss."""

    errors: pd.DataFrame  # policy x metric: live, sim (means), their 95% intervals, error_pct
    ranking: pd.DataFrame  # by: live order, sim order, same, unresolved live pairs
    pairs: pd.DataFrame  # by metric and pair: live paired difference, sim's, status

    @property
    def same_ranking(self) -> bool:
        """Every pair the engine separated is ordered the same way by the simulator (an
        order inside a cluster the engine did not resolve is no miss)."""
        return bool((self.pairs["status"] != "MISS").all()) if len(self.pairs) else True

    @property
    def separated(self) -> int:
        return int((self.pairs["status"] != "unresolved").sum()) if len(self.pairs) else 0


def agreement(pairs: list[tuple[RunResult, RunResult]]) -> Agreement:
    """``pairs``: (live, sim) per policy and repeat, the sim replaying the live run's
    trace. Repeats of a policy (several live runs of it) are averaged, with their 95%
    interval (``nightjar.results.stats.mean_interval``); the rankings compare the means, and
    name the live neighbours whose intervals overlap (an order the engine itself did
    not resolve). The pair check pairs the k-th run of each policy with the k-th of
    the others (``--live-run`` given again: the repeats ran in that order) and holds
    against the simulator only the pairs whose paired live interval excludes zero."""
    from nightjar.results.paired import METRICS, paired_diff
    from nightjar.results.stats import Interval, mean_interval

    live_v: dict[str, dict[str, list[float]]] = {}
    sim_v: dict[str, dict[str, list[float]]] = {}
    for live, sim in pairs:
        a, b = summarize(live).as_dict(), summarize(sim).as_dict()
        lvals = live_v.setdefault(live.policy, {k: [] for k in AGREEMENT})
        svals = sim_v.setdefault(live.policy, {k: [] for k in AGREEMENT})
        for key in AGREEMENT:
            lvals[key].append(float(a[key]))
            svals[key].append(float(b[key]))
    live_m: dict[str, dict[str, Interval]] = {
        p: {k: mean_interval(v) for k, v in m.items()} for p, m in live_v.items()}
    sim_m: dict[str, dict[str, Interval]] = {
        p: {k: mean_interval(v) for k, v in m.items()} for p, m in sim_v.items()}
    rows = []
    for policy in live_m:
        for key in AGREEMENT:
            lv_i, sv_i = live_m[policy][key], sim_m[policy][key]
            lv, sv = lv_i.mean, sv_i.mean
            ok = lv and np.isfinite(lv) and np.isfinite(sv)
            rows.append({"policy": policy, "metric": key, "runs": lv_i.n, "live": lv,
                         "sim": sv, "live_95": lv_i.format("{:.4g}"),
                         "sim_95": sv_i.format("{:.4g}"),
                         "error_pct": 100.0 * (sv / lv - 1.0) if ok else np.nan})

    def order(m: dict[str, dict[str, Interval]], key: str, best_low: bool) -> list[str]:
        return sorted(m, key=lambda p: m[p][key].mean if best_low else -m[p][key].mean)

    ranking = []
    for key, low, label in (("e2e_s_mean", True, "mean E2E"),
                            ("throughput_tok_s", False, "throughput")):
        lo, so = order(live_m, key, low), order(sim_m, key, low)
        # Neighbours in the live order whose intervals overlap (one run each: all).
        open_pairs = [f"{x}~{y}" for x, y in pairwise(lo)
                      if not (live_m[x][key].above(live_m[y][key])
                              or live_m[x][key].below(live_m[y][key]))]
        sep = " < " if low else " > "
        ranking.append({"by": label, "live": sep.join(lo), "sim": sep.join(so),
                        "same": lo == so, "unresolved_live": ", ".join(open_pairs) or "-"})
    # Repeat k of every policy paired with repeat k of the others.
    by_k = {"live": _by_repeat(live_v), "sim": _by_repeat(sim_v)}
    names = list(live_m)
    pair_rows = []
    for key, name, _up in METRICS:
        for i, pa in enumerate(names):
            for pb in names[i + 1:]:
                lp = paired_diff(by_k["live"], pa, pb, key)
                sp = paired_diff(by_k["sim"], pa, pb, key)
                status = "unresolved"
                if lp.separated:
                    status = "same" if (sp.diff.mean > 0) == (lp.diff.mean > 0) else "MISS"
                pair_rows.append({"metric": name, "a": pa, "b": pb, "repeats": lp.diff.n,
                                  "live_diff_pct": lp.rel_pct, "live_half_pct": lp.rel_half_pct,
                                  "sim_diff_pct": sp.rel_pct, "status": status})
    return Agreement(pd.DataFrame(rows), pd.DataFrame(ranking), pd.DataFrame(pair_rows))


def _by_repeat(values: dict[str, dict[str, list[float]]]) -> dict[str, dict[int, dict[str, float]]]:
    """policy -> metric -> [repeats] as policy -> repeat -> metric -> value."""
    return {p: {k: {m: vals[m][k] for m in vals} for k in range(len(vals[AGREEMENT[0]]))}
            for p, vals in values.items()}
