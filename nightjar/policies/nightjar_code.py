"""``nightjar-code``: a port of the bandit the Nightjar authors published.

Source: ``ADABinGreedy`` in github.com/lihuahua123/vllm_speculative,
``vllm/core/spec_scheduler.py`` at commit 427535bb (read, not copied). It differs
from the paper's text (our ``nightjar``) in four ways, all kept here:

- **Hard gate**: when the batch has more than 20 requests and more than 2 requests
  per second arrived recently, gamma is 0, nothing is learned from that step, and
  the policy is marked *disabled* (exploration stops everywhere until a
  re-enable decision turns speculation back on).
- **Linear contexts**: bin ``(B - 1) // 2`` (B = 1-2, 3-4, ...) capped at 11, so
  every B >= 23 shares the last bin.
- **Exploration by prior weights**: an exploring bin draws gamma with probability
  proportional to a per-bin prior: 0.5 for every gamma >= 1 and 0 for gamma 0 in
  bins whose middle batch size ``2 * bin + 1.5`` is below 50 (all twelve bins),
  else ``1 + (K - g) / K``. Gamma 0 is therefore never explored; it runs only
  through the gate (or the re-enable branch).
- **Reward**: ``(emitted / B) / step time`` (tokens per second one request sees),
  averaged with a plain running mean (no forgetting). Exploitation takes the
  argmax of ``(mean * n + prior) / (n + 1)``.

The block/bin schedule is the paper's (blocks of 2^(j-1) rounds per context bin,
bins of ``int(sqrt(block))`` rounds, bin i explores with probability 1/sqrt(i)),
counted only on ungated decisions, as in the code. Departures forced by bugs in
the published code are listed in ``docs/policies.md``.

Arguments (comma-separated), for ablations: ``nogate`` drops the hard gate,
``allow0`` gives gamma 0 the same prior weight (0.5) as the others, so it is
explored and learned like any arm.
"""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass

from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import register

NUM_BINS = 12  # the published default ``num_log_bins``
GATE_BATCH = 20  # gate when B > this ...
GATE_RATE_RPS = 2.0  # ... and the arrival rate > this
PRIOR_STRENGTH = 1.0  # the prior counts as one observation
LARGE_BATCH = 50.0  # bins whose middle batch size reaches this get the large-load prior
SMALL_PRIOR = 0.5
SWITCH_ALPHA = 0.3  # EMA of observed draft catch-up costs (stands in for the C_prefill table)
_EPS = 1e-6  # the code's guard in ``elapsed + 1e-6``
_ARGS = ("nogate", "allow0")


def context_bin(batch_size: int) -> int:
    """``(B - 1) // 2`` capped at the last bin: B = 1-2 -> 0, 3-4 -> 1, ..., >= 23 -> 11."""
    return min(max(batch_size - 1, 0) // 2, NUM_BINS - 1)


def prior_weights(arms: int, allow_zero: bool = False) -> list[list[float]]:
    """Per bin, the prior weight of each arm (gamma 0..arms-1)."""
    out = []
    for b in range(NUM_BINS):
        if b * 2 + 1.5 < LARGE_BATCH:
            row = [SMALL_PRIOR] * arms
            if not allow_zero:
                row[0] = 0.0
        else:
            row = [1.0 + (arms - a) / arms for a in range(arms)]
        out.append(row)
    return out


@dataclass
class _BinSchedule:
    """The block / bin cascade of one context bin."""

    block: int = 1
    bin_idx: int = 1
    steps: int = 0
    exploring: bool = True

    def advance(self, rng: random.Random) -> bool:
        """Count one decision; returns whether it falls in an exploration bin."""
        block_len = 2 ** (self.block - 1)
        bin_len = max(1, int(math.sqrt(block_len)))
        if self.steps >= bin_len:
            self.steps = 0
            self.bin_idx += 1
            if (self.bin_idx - 1) * bin_len >= block_len:
                self.block += 1
                self.bin_idx = 1
            self.exploring = rng.random() < 1.0 / math.sqrt(self.bin_idx)
        self.steps += 1
        return self.exploring


class NightjarCodePolicy:
    name = "nightjar-code"

    def __init__(self, env: PolicyEnv, gate: bool = True, allow_zero: bool = False) -> None:
        self.arms = env.gamma_max + 1
        self.gate = gate
        self.prior = prior_weights(self.arms, allow_zero)
        self._rng = random.Random(env.seed)
        self.n = [[0] * self.arms for _ in range(NUM_BINS)]
        self.mean = [[0.0] * self.arms for _ in range(NUM_BINS)]
        self._sched = [_BinSchedule() for _ in range(NUM_BINS)]
        self.disabled = False
        self.c_prefill = 0.0
        # Per decision not yet observed: whether the gate made it (learning paused)
        # and the gamma chosen.
        self._pending: deque[tuple[bool, int]] = deque(maxlen=8)
        self._last_chosen = -1

    def gated(self, ctx: StepContext) -> bool:
        rate = ctx.arrival_rate_rps if ctx.arrival_rate_rps is not None else 0.0
        return self.gate and ctx.batch_size > GATE_BATCH and rate > GATE_RATE_RPS

    def decide(self, ctx: StepContext) -> int:
        if self.gated(ctx):
            self.disabled = True
            self._pending.append((True, 0))
            return 0
        g = self._choose(context_bin(ctx.batch_size))
        self._pending.append((False, g))
        return g

    def _choose(self, c: int) -> int:
        exploring = self._sched[c].advance(self._rng)
        if exploring and not self.disabled:
            return self._rng.choices(range(self.arms), weights=self.prior[c])[0]
        if self.disabled:
            return self._reenable(c)
        n, mean, prior = self.n[c], self.mean[c], self.prior[c]
        scores = [
            (mean[a] * n[a] + prior[a] * PRIOR_STRENGTH) / (n[a] + PRIOR_STRENGTH)
            for a in range(self.arms)
        ]
        return max(range(self.arms), key=scores.__getitem__)

    def _reenable(self, c: int) -> int:
        """After the gate: per-token time of gamma 0 vs each gamma plus its catch-up cost.

        An arm never measured has reward 0, so its per-token time is infinite (as
        numpy's ``1 / 0.0`` in the original); ties go to the lowest gamma.
        """
        mean = self.mean[c]
        scores = [1.0 / mean[0] if mean[0] > 0 else math.inf]
        for g in range(1, self.arms):
            per_token = 1.0 / mean[g] if mean[g] > 0 else math.inf
            scores.append(per_token + self.c_prefill / g)
        arm = min(range(self.arms), key=scores.__getitem__)
        if arm > 0:
            self.disabled = False
        return arm

    def observe(self, outcome: StepOutcome) -> None:
        gated, chosen = self._pending.popleft() if self._pending else (False, outcome.gamma)
        # The published code credits the arm it chose; an outcome is credited only
        # when the gamma that ran is one the policy asked for (this decision, or the
        # one before it: live, the verified length trails the decision by a step).
        # Otherwise an engine-forced 0 (the first decode step after admission, live)
        # would teach it gamma 0, which its priors never explore.
        asked = outcome.gamma in (chosen, self._last_chosen)
        self._last_chosen = chosen
        if outcome.switch_cost_s > 0.0:
            self.c_prefill += SWITCH_ALPHA * (outcome.switch_cost_s - self.c_prefill)
        b, g = outcome.batch_size, outcome.gamma
        if gated or not asked or outcome.clamped or b <= 0 or not 0 <= g < self.arms:
            return
        c = context_bin(b)
        reward = (outcome.emitted / b) / (outcome.step_time_s + _EPS)
        self.n[c][g] += 1
        self.mean[c][g] += (reward - self.mean[c][g]) / self.n[c][g]


def parse_args(arg: str | None) -> tuple[bool, bool]:
    """``nogate`` / ``allow0`` flags -> (gate, allow_zero)."""
    flags = [f.strip() for f in arg.split(",")] if arg is not None else []
    for f in flags:
        if f not in _ARGS:
            raise NightjarInputError(
                f"policy 'nightjar-code:{arg}': unknown argument {f!r} "
                f"(expected a comma-separated subset of {', '.join(_ARGS)})"
            )
    return "nogate" not in flags, "allow0" in flags


@register(
    "nightjar-code",
    "port of the authors' published ADABinGreedy (nightjar-code:nogate, :allow0 ablations)",
)
def _nightjar_code(arg: str | None, env: PolicyEnv) -> Policy:
    gate, allow_zero = parse_args(arg)
    return NightjarCodePolicy(env, gate=gate, allow_zero=allow_zero)
