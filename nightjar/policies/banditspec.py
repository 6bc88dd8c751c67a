"""``banditspec`` (UCBSpec) and ``banditspec-exp3`` (EXP3Spec): context-free bandits over gamma.

After BanditSpec (Hou et al., 2025, arXiv:2505.15141), which picks the speculative
decoding hyperparameter each round with a multi-armed bandit. Arms are gamma
0..gamma_max; the reward of a step is its throughput, ``emitted / step_time_s``,
divided by the largest throughput seen so far so that it lies in [0, 1] as both
algorithms assume. Steps that also prefilled admitted prompts are not credited
(their time is the load's, not the arm's). Neither sees the batch size: that is
the point of the baseline, the paper targets a single request stream, not a
batch whose load changes.

- UCBSpec: UCB1; every arm once, then ``argmax mean + sqrt(2 ln t / n)``.
- EXP3Spec: EXP3 with mixing ``EXP3_GAMMA``; importance-weighted reward
  ``r / p`` with ``p`` the probability the arm had when it was last chosen
  (outcomes may arrive a step late, after the distribution moved).
"""

from __future__ import annotations

import math
import random

from nightjar.core.estimators import parse_no_arg
from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.policies.registry import register

EXP3_GAMMA = 0.1


class _Normaliser:
    """Maps step throughput into [0, 1] by the running maximum."""

    def __init__(self) -> None:
        self.top = 0.0

    def reward(self, outcome: StepOutcome) -> float | None:
        # A mixed step's time includes prompts admitted by the load, not by the arm;
        # BanditSpec's round is a pure speculative round, so such steps are skipped.
        if outcome.clamped or outcome.step_time_s <= 0.0 or outcome.prefill_tokens > 0:
            return None
        rate = outcome.emitted / outcome.step_time_s
        self.top = max(self.top, rate)
        return rate / self.top if self.top > 0.0 else 0.0


class UcbSpecPolicy:
    name = "banditspec"

    def __init__(self, gamma_max: int) -> None:
        self.arms = gamma_max + 1
        self._sum = [0.0] * self.arms
        self._n = [0] * self.arms
        self._t = 0
        self._norm = _Normaliser()

    def decide(self, ctx: StepContext) -> int:
        for g in range(self.arms):
            if self._n[g] == 0:
                return g
        log_t = math.log(max(self._t, 1))
        return max(
            range(self.arms),
            key=lambda g: self._sum[g] / self._n[g] + math.sqrt(2.0 * log_t / self._n[g]),
        )

    def observe(self, outcome: StepOutcome) -> None:
        r = self._norm.reward(outcome)
        if r is None or outcome.gamma >= self.arms:
            return
        self._t += 1
        self._sum[outcome.gamma] += r
        self._n[outcome.gamma] += 1


class Exp3SpecPolicy:
    name = "banditspec-exp3"

    def __init__(self, gamma_max: int, seed: int) -> None:
        self.arms = gamma_max + 1
        self._rng = random.Random(seed)
        self._logw = [0.0] * self.arms
        self._probs = [1.0 / self.arms] * self.arms
        self._chosen_p = list(self._probs)
        self._norm = _Normaliser()

    def _refresh(self) -> None:
        top = max(self._logw)
        w = [math.exp(x - top) for x in self._logw]  # shifted: no overflow
        total = sum(w)
        mix = EXP3_GAMMA / self.arms
        self._probs = [(1.0 - EXP3_GAMMA) * x / total + mix for x in w]

    def decide(self, ctx: StepContext) -> int:
        u = self._rng.random()
        acc = 0.0
        g = self.arms - 1
        for i, p in enumerate(self._probs):
            acc += p
            if u < acc:
                g = i
                break
        self._chosen_p[g] = self._probs[g]
        return g

    def observe(self, outcome: StepOutcome) -> None:
        r = self._norm.reward(outcome)
        g = outcome.gamma
        if r is None or g >= self.arms:
            return
        self._logw[g] += EXP3_GAMMA * (r / self._chosen_p[g]) / self.arms
        self._refresh()


@register("banditspec", "UCBSpec: context-free UCB1 over gamma, reward = step throughput")
def _ucb(arg: str | None, env: PolicyEnv) -> Policy:
    parse_no_arg("banditspec", arg)
    return UcbSpecPolicy(env.gamma_max)


@register("banditspec-exp3", "EXP3Spec: context-free EXP3 over gamma, reward = step throughput")
def _exp3(arg: str | None, env: PolicyEnv) -> Policy:
    parse_no_arg("banditspec-exp3", arg)
    return Exp3SpecPolicy(env.gamma_max, env.seed)
