"""The bound's recorder keeps sums over the decoding requests as they join and leave
(nightjar.sim.yardstick): each step's figures must equal a direct sum over that
step's requests, recomputed here from what the engine held at the step."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from nightjar.profile.profile import load_profile
from nightjar.sim import DraftKVMode, SchedulerMode, SimConfig, simulate
from nightjar.sim import yardstick as ys
from nightjar.sim.bound import MAX_STRETCH
from nightjar.sim.knobs import AcceptanceModel
from nightjar.trace.schema import parse_trace_json
from nightjar.trace.trace import Trace, load_trace, materialize
from tests.compiled import patches_the_simulator

RTX = "rtx4090/deepseek-r1-distill-qwen-7b+qwen2.5-0.5b"
SAMPLE = 7  # steps whose rebuild is checked at every stretch length


def _opt_out() -> Trace:
    # Requests that may not speculate, between ones that may: per-request lengths.
    doc = {"format_version": 1, "name": "opt-out", "seed": 3, "workload": "alpaca",
           "segments": [{"duration_s": 10, "rate_rps": 25, "speculate": False},
                        {"duration_s": 10, "rate_rps": 35}]}
    return materialize(parse_trace_json(doc, "<test>", "opt-out"))


class _Reference:
    """Captures each decode step's requests as the engine held them, and checks the
    recorder's chunk against sums over them."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.steps: list[dict[str, Any]] = []
        self.checked = 0
        self.sampled = 0
        init, step = ys.Recorder.__init__, ys.Recorder.step
        tokens_of, walk = ys.Recorder._tokens_of, ys.Recorder._walk
        ref = self

        def spy_init(rec: ys.Recorder, *a: Any, **k: Any) -> None:
            init(rec, *a, **k)
            alpha, no_spec = k["alpha"], k.get("no_spec")
            j = np.arange(rec.gamma_max + 1)
            reach = np.clip(alpha, 0.0, 0.999)[:, None] ** j[None, :]
            reach *= rec.decay ** (j * (j - 1) / 2.0)[None, :]
            ref.reach, ref.no_spec = reach, no_spec

        def spy_step(rec: ys.Recorder, **k: Any) -> None:
            rids = k["rids"].copy()
            gam = k["gammas"]
            ref.steps.append({
                "t": rec.t, "rids": rids, "left": -k["neg_left"].copy(),
                "gammas": np.full(rids.size, gam) if isinstance(gam, int) else gam.copy(),
                "start": np.asarray(rec.start)[rids], "key": np.asarray(rec.prompt_at)[rids],
                "prompt": np.asarray(rec.prompt_tokens, dtype=np.float64)[rids],
            })
            step(rec, **k)

        def spy_tokens_of(rec: ys.Recorder, c: Any) -> tuple[np.ndarray, np.ndarray]:
            tokens, played = tokens_of(rec, c)
            for i, s in enumerate(ref.steps[: c.n]):
                want, want_played = ref.tokens(s, rec.gamma_max)
                np.testing.assert_allclose(tokens[i], want, rtol=1e-12)
                assert played[i] == pytest.approx(want_played, rel=1e-12)
            if not rec.skip:
                ref.done(c.n)
            return tokens, played

        def spy_walk(rec: ys.Recorder, c: Any, *a: Any) -> None:
            # Every stretch length at every SAMPLE-th step (the walk asks for few).
            for i, s in enumerate(ref.steps[: c.n]):
                if (s["t"] % SAMPLE == 0) and rec.skip:
                    got = [rec._rebuild_s(c, i, k) for k in range(1, MAX_STRETCH + 1)]
                    want = rec.rate * ref.rebuild(s)
                    np.testing.assert_array_equal(got, want[1:])
                    ref.sampled += 1
            walk(rec, c, *a)
            if rec.skip:
                ref.done(c.n)

        monkeypatch.setattr(ys.Recorder, "__init__", spy_init)
        monkeypatch.setattr(ys.Recorder, "step", spy_step)
        monkeypatch.setattr(ys.Recorder, "_tokens_of", spy_tokens_of)
        monkeypatch.setattr(ys.Recorder, "_walk", spy_walk)

    def done(self, m: int) -> None:
        del self.steps[:m]
        self.checked += m

    def tokens(self, s: dict[str, Any], g_max: int) -> tuple[np.ndarray, float]:
        """Per gamma, sum over the step's requests of sum_{j <= min(g, cap)} reach_j,
        cap the drafts a request can still emit (0 where it may not speculate); and
        the same at each request's own length."""
        cum = np.cumsum(self.reach[s["rids"]], axis=1)
        cap = np.minimum(s["left"] - 1, g_max)
        if self.no_spec is not None:
            cap[self.no_spec[s["rids"]]] = 0
        rows = np.arange(cap.size)
        per_g = [float(cum[rows, np.minimum(g, cap)].sum()) for g in range(g_max + 1)]
        own = float(cum[rows, np.minimum(np.minimum(s["gammas"], g_max), cap)].sum())
        return np.array(per_g), own

    @staticmethod
    def rebuild(s: dict[str, Any]) -> np.ndarray:
        """Per stretch length k: request-steps decoded in it, and the first prompt
        chunks of those whose prompt ran at most k steps back."""
        t, cap = s["t"], MAX_STRETCH
        age = np.clip(t - s["start"], 0, cap)
        decoded = np.array([np.minimum(age, k).sum() for k in range(cap + 1)], dtype=float)
        key = s["key"]
        has = key >= 0
        lag = np.floor(t - key[has])
        prompt = np.array([s["prompt"][has][lag <= k].sum() for k in range(cap + 1)])
        out: np.ndarray = decoded + prompt
        return out


@patches_the_simulator
@pytest.mark.parametrize("case", ["v0-skip", "v1-skip-nightjar+", "v1-sync-tetris",
                                  "opt-out", "positional-g5"])
def test_each_steps_sums_equal_a_direct_sum_over_its_requests(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = _Reference(monkeypatch)
    trace, policy = load_trace("alpaca-burst"), "fixed:3"
    cfg = SimConfig(seed=1, gamma_max=3, draft_kv_mode=DraftKVMode.SKIP)
    if case == "v0-skip":
        cfg = SimConfig(seed=1, gamma_max=3, engine=SchedulerMode.V0,
                        draft_kv_mode=DraftKVMode.SKIP)
        policy = "oracle"
    elif case == "v1-skip-nightjar+":
        policy = "nightjar+"
    elif case == "v1-sync-tetris":
        cfg = SimConfig(seed=2, gamma_max=3, draft_kv_mode=DraftKVMode.SYNC)
        policy = "tetris"
    elif case == "opt-out":
        trace, cfg, policy = _opt_out(), SimConfig(seed=4, gamma_max=4), "fixed:4"
    else:
        cfg = SimConfig(seed=2, gamma_max=5, acceptance_model=AcceptanceModel.POSITIONAL)
        policy = "tetris"
    result = simulate(trace, load_profile(RTX), policy, cfg)
    decode_steps = sum(1 for s in result.steps if s.batch_size > 0)
    assert ref.checked == decode_steps > 500
    if cfg.draft_kv_mode is DraftKVMode.SKIP:
        assert ref.sampled > decode_steps // (2 * SAMPLE)
    assert not ref.steps
    assert math.isfinite(result.extra["bound_ptl_s"])
    assert result.extra["bound_ptl_s"] <= result.extra["expected_ptl_s"] * (1 + 1e-9) or (
        policy == "tetris"
    )
