"""``nightjar sim --seeds N`` and ``--prior``; the paper-config profiles."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from nightjar.cli import main
from nightjar.errors import NightjarInputError
from nightjar.profile.priors import (
    BatchScaledLatency,
    ScaledLatency,
    SpecScaledLatency,
    parse_prior,
)
from nightjar.profile.profile import load_profile
from nightjar.results.multiseed import aggregate, beats, verdicts
from nightjar.sim import OnUnfit, SimConfig, simulate
from nightjar.sim.runner import policy_env
from nightjar.trace.trace import load_trace

RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"


def test_seeds_write_per_seed_rows_and_intervals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code = main(["sim", "--trace", "steady_low", "--policy", "nospec", "--policy", "fixed:2",
                 "--seeds", "2", "--seed", "3", "--no-report", "--quiet", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "±" in text and "seeds 3..4" in text
    rows = list(csv.DictReader((out / "seeds.csv").open()))
    assert sorted({r["seed"] for r in rows}) == ["3", "4"]
    assert {r["policy"] for r in rows} == {"nospec", "fixed:2", "oracle"}
    intervals = list(csv.DictReader((out / "intervals.csv").open()))
    tput = [r for r in intervals if r["policy"] == "fixed:2" and r["metric"] == "throughput_tok_s"]
    assert len(tput) == 1 and tput[0]["n"] == "2"
    assert float(tput[0]["lo"]) <= float(tput[0]["mean"]) <= float(tput[0]["hi"])
    for seed in (3, 4):
        assert (out / f"seed-{seed}" / "fixed-2" / "steps.csv").is_file()
    # Seeds differ: the trace's arrivals are re-drawn per seed.
    by_seed = {r["seed"]: r["throughput_tok_s"] for r in rows if r["policy"] == "nospec"}
    assert by_seed["3"] != by_seed["4"]
    assert not (out / "report.html").exists()  # --no-report


def test_seeds_write_a_top_level_page_with_the_intervals_and_verdicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    assert main(["sim", "--trace", "live-spec-wins", "--policy", "nospec", "--policy",
                 "fixed:3", "--seeds", "3", "--no-oracle", "--quiet", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    page = (out / "report.html").read_text()
    rows = {(r["policy"], r["metric"]): r for r in csv.DictReader((out / "intervals.csv").open())}
    tput = rows[("fixed:3", "throughput_tok_s")]
    assert f"{float(tput['mean']):.1f} ± {float(tput['hi']) - float(tput['mean']):.1f}" in page
    # Every paired verdict the terminal printed is on the page; the first seed's report
    # (the one written) is linked.
    verdict = next(line for line in printed.splitlines() if line.startswith("tok/s: best mean"))
    assert verdict.split(";")[0] in page
    assert 'href="seed-0/report.html"' in page and (out / "seed-0" / "report.html").is_file()
    assert "seeds 0..2" in page


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--seeds", "0"], "--seeds must be in 1.."),
     (["--prior", "bogus"], "expected exact, none"),
     (["--prior", "scale:0"], "must be in 0.001..1000"),
     (["--policy", "nightjar-code:fast"], "unknown argument 'fast'")],
)
def test_bad_input_is_one_line_exit_2(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code = main(["sim", "--trace", "steady_low", "--quiet", "--out", str(tmp_path / "o"), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and len(err.strip().splitlines()) == 1


def test_priors_scale_the_table() -> None:
    p = load_profile(RTX)
    t0, t3 = p.step_time_s(8, 0, 512.0), p.step_time_s(8, 3, 512.0)
    assert ScaledLatency(p, 0.7).step_time_s(8, 3, 512.0) == pytest.approx(0.7 * t3)
    spec = SpecScaledLatency(p, 0.7)
    assert spec.step_time_s(8, 0, 512.0) == pytest.approx(t0)
    assert spec.step_time_s(8, 3, 512.0) == pytest.approx(t0 + 0.7 * (t3 - t0))
    assert parse_prior("exact", p) is p and parse_prior("none", p) is None
    assert parse_prior("a100-80gb/vicuna-13b+vicuna-68m", p) is not p
    with pytest.raises(NightjarInputError):
        parse_prior("scale:", p)


def test_batch_scale_is_wrong_one_way_at_small_batches_and_the_other_at_large() -> None:
    p = load_profile(RTX)
    prior = parse_prior("batch-scale:1.3,0.8", p)
    assert isinstance(prior, BatchScaledLatency)
    for b, f in ((1, 1.3), (8, 1.3), (64, 0.8), (256, 0.8)):
        assert prior.step_time_s(b, 2, 512.0) == pytest.approx(f * p.step_time_s(b, 2, 512.0))
    # Between 8 and 64 the factor moves log-linearly: halfway (in log B) at B = 22.6.
    assert 0.8 < prior.factor(16) < prior.factor(9) < 1.3
    assert prior.factor(23) == pytest.approx(1.05, abs=0.01)
    for bad in ("batch-scale:1.3", "batch-scale:1.3,0", "batch-scale:a,b"):
        with pytest.raises(NightjarInputError):
            parse_prior(bad, p)


def test_prior_none_gives_the_policies_no_acceptance_rate_either() -> None:
    trace, p = load_trace("steady_low"), load_profile(RTX)
    assert policy_env(trace, p, SimConfig(), "exact").acceptance_prior == 0.55
    none = policy_env(trace, p, SimConfig(), "none")
    assert none.latency is None and none.acceptance_prior is None
    assert none.truth is p  # the yardstick still knows the hardware


def test_the_oracle_plans_with_the_exact_profile_whatever_the_prior() -> None:
    trace, p = load_trace("steady_low"), load_profile(RTX)
    exact = simulate(trace, p, "oracle", SimConfig(seed=1))
    wrong = simulate(trace, p, "oracle", SimConfig(seed=1), prior="spec-scale:0.2")
    assert [s.gamma for s in exact.steps] == [s.gamma for s in wrong.steps]
    # ... while a planning policy does see the wrong table.
    dsd = simulate(trace, p, "dsd", SimConfig(seed=1))
    dsd_wrong = simulate(trace, p, "dsd", SimConfig(seed=1), prior="spec-scale:0.2")
    assert [s.gamma for s in dsd.steps] != [s.gamma for s in dsd_wrong.steps]


def test_nightjar_plus_runs_without_a_table() -> None:
    r = simulate(load_trace("steady_low"), load_profile(RTX), "nightjar+", prior="none")
    assert all(q.finish_s == q.finish_s for q in r.requests)  # every request finished


def test_paper_config_profiles_pin_memory_and_length() -> None:
    a100 = load_profile("a100-80gb-paper/vicuna-13b+vicuna-68m")
    assert a100.memory.kv_blocks(True) == a100.memory.kv_blocks(False) == 717
    assert a100.memory.max_model_len == 2048 and a100.max_context_len == 2048
    rtx = load_profile("rtx4090-paper/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b")
    assert (rtx.memory.kv_blocks(True), rtx.memory.kv_blocks(False)) == (4112, 4938)
    # Same latency model as ours in eager mode (the paper's step logs are eager): the
    # verify pass is GPU-bound either way, the launch-bound draft costs more.
    ours = load_profile(RTX)
    assert rtx.to_json()["roofline"]["execution"] == "eager"
    assert rtx.decode_timing(16, 2, 512.0).draft_s > ours.decode_timing(16, 2, 512.0).draft_s
    assert rtx.step_time_s(16, 2, 512.0) > ours.step_time_s(16, 2, 512.0)
    # A prompt longer than the pinned window never runs: refused, or skipped. An answer
    # that would run past it stops there, as vLLM's scheduler stops it, with at least
    # the token its prefill samples.
    rag = load_trace("longctx-rag").head(100)  # 5 of its first 100 prompts fit 2048
    with pytest.raises(NightjarInputError, match="prompts longer than profile a100-80gb-paper"):
        simulate(rag, a100, "fixed:1")
    r = simulate(rag, a100, "fixed:1", on_unfit=OnUnfit.SKIP)
    assert r.extra["rejected_requests"] == 95
    assert all(q.prompt_tokens <= 2048 for q in r.requests)
    burst = load_trace("burst")
    r = simulate(burst, a100, "fixed:1")
    assert r.extra["rejected_requests"] == 0 and len(r.requests) == len(burst)
    long = burst.prompt_tokens + burst.output_tokens > 2048
    assert r.extra["capped_requests"] == long.sum() > 0
    for q, cut in zip(r.requests, long.tolist(), strict=True):
        if cut:
            assert q.prompt_tokens + q.output_tokens == max(2048, q.prompt_tokens + 1)


def test_multiseed_verdicts_pair_the_seeds() -> None:
    """c's values spread across seeds as much as a's (their own intervals overlap),
    but c trails a by 1 on every seed: paired, a beats c; d's lead and lag cancel."""
    rows: list[dict[str, float | str]] = []
    table = [(10.0, 5.0, 9.0, 12.0), (13.0, 8.0, 12.0, 11.0), (8.0, 3.2, 7.0, 7.0)]
    for seed, values in enumerate(table):
        for policy, value in zip("abcd", values, strict=True):
            rows.append({"seed": seed, "policy": policy, "throughput_tok_s": value,
                         "e2e_s_mean": 1.0, "ttft_s_mean": 1.0, "tpot_ms_mean": 1.0,
                         "preemptions": 0.0, "spec_time_share": 0.0,
                         "regret_bound_pct": float("nan"), "gain_static_pct": float("nan"),
                         "step_oracle_pct": float("nan")})
    agg = aggregate(rows)
    assert not agg["c"]["throughput_tok_s"].below(agg["a"]["throughput_tok_s"])  # unpaired: tie
    assert beats(rows, "a", "b", "throughput_tok_s")
    assert beats(rows, "a", "c", "throughput_tok_s")  # -1 on every seed
    assert not beats(rows, "a", "d", "throughput_tok_s")
    line = verdicts(rows, agg, "throughput_tok_s")[0]
    assert "best mean a" in line and "c (1.0±0.0)" in line and "zero with d" in line
