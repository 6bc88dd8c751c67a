"""``nightjar``: the paper's contextual bandit over gamma, with the batch size as context.

Reconstruction (docs/policies.md has the reasoning for every choice the paper
leaves open):

- context = power-of-two batch-size bucket (:func:`nightjar.core.estimators.bucket_of`);
- arms = gamma 0..gamma_max;
- per context, rounds (decisions taken in that context) are grouped in blocks
  j = 1, 2, ... of 2^(j-1) rounds; each block is cut into bins of
  round(sqrt(block length)) rounds; the arm is fixed for a bin;
- bin i of a block is an exploration bin with probability 1/sqrt(i) (a uniformly
  random arm), otherwise it exploits the arm with the lowest smoothed loss;
- loss = per-token latency of the step's decode: ``(step_time_s - switch_cost_s
  - prefill) * batch_size / emitted``, where ``prefill`` is the learned time of the
  prompt tokens admitted in the same step (:class:`nightjar.core.estimators.PrefillCost`;
  admissions are the load's doing, not the arm's; a mixed step is not credited
  until some prefill cost is known); an
  arm across the 0 / >0 boundary from the current state also pays half the
  learned switch cost C_switch (a round trip costs one draft-KV rebuild),
  amortised over the tokens the bin buys; exploration bins down-weight such arms
  by the same amount, so a costly switch is also explored less;
- since every block restarts at i = 1 (explore with probability 1), exploration
  never stops, so turning speculation off is never a dead end.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from nightjar.core.estimators import PrefillCost, bucket_of, parse_no_arg
from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.policies.registry import register

# Floor on the smoothing weight of a new observation: the mean of the first 20
# observations, then an exponential average over ~20, so an arm's estimate follows
# a load that drifts within a bucket instead of freezing on old data.
ALPHA_MIN = 0.05
# EMA weight for the observed switch cost.
SWITCH_ALPHA = 0.2


@dataclass(slots=True)
class _Schedule:
    """The block/bin position of one context.

    Invariants once a bin has started: ``block_len == 2 ** (block - 1)``,
    ``1 <= bin_idx <= bins`` and ``0 <= left <= bin_len``.
    """

    block: int = 0  # 0 = no round yet; the first bin opens block 1
    block_len: int = 0
    bin_len: int = 1
    bins: int = 0
    bin_idx: int = 0
    left: int = 0  # rounds left in the current bin; 0 = start a new bin
    arm: int = 0
    explore: bool = True

    def next_bin(self) -> int:
        """Advance to the next bin (and block when this one is done); returns its index."""
        if self.bin_idx >= self.bins:
            self.block += 1
            self.block_len = 1 << (self.block - 1)
            self.bin_len = max(1, round(math.sqrt(self.block_len)))
            self.bins = -(-self.block_len // self.bin_len)
            self.bin_idx = 0
        self.bin_idx += 1
        # The last bin of a block takes only the rounds left in the block.
        self.left = min(self.bin_len, self.block_len - (self.bin_idx - 1) * self.bin_len)
        return self.bin_idx


class NightjarPolicy:
    """Per-context hierarchical explore/exploit bandit with switch-cost amortisation."""

    name = "nightjar"

    def __init__(self, gamma_max: int, seed: int) -> None:
        self.arms = gamma_max + 1
        self._rng = random.Random(seed)
        self._sched: dict[int, _Schedule] = {}
        # Per context: smoothed loss, observation count, smoothed tokens per request.
        self._loss: dict[int, list[float]] = {}
        self._count: dict[int, list[int]] = {}
        self._tau: dict[int, list[float]] = {}
        # Per context: smoothed step time of pure decode steps (the reference the
        # prefill cost is learned against) and how many there were.
        self._time: dict[int, list[float]] = {}
        self._timed: dict[int, list[int]] = {}
        self._prefill = PrefillCost()
        self._switch_cost = 0.0
        # Whether the last decision was gamma 0 (then the draft KV goes stale and
        # the next gamma > 0 step pays C_switch).
        self._off = False

    def _context(self, c: int) -> _Schedule:
        sched = self._sched.get(c)
        if sched is None:
            sched = self._sched[c] = _Schedule()
            self._loss[c] = [0.0] * self.arms
            self._count[c] = [0] * self.arms
            self._tau[c] = [float(g + 1) for g in range(self.arms)]
            self._time[c] = [0.0] * self.arms
            self._timed[c] = [0] * self.arms
        return sched

    def decide(self, ctx: StepContext) -> int:
        if not ctx.draft_resident:
            self._off = True
            return 0  # the engine clamps to 0 anyway; not a round of the bandit
        c = bucket_of(ctx.batch_size)
        sched = self._context(c)
        if sched.left == 0:
            i = sched.next_bin()
            sched.explore = self._rng.random() * math.sqrt(i) < 1.0
            sched.arm = self._pick(c, sched.bin_len, sched.explore)
        sched.left -= 1
        # The switch state is what runs next, not the last outcome, which may trail
        # the decisions by a step.
        self._off = sched.arm == 0
        return sched.arm

    def _toggle_penalty(self, c: int, g: int, horizon: int) -> float:
        """Switch cost per token for moving to arm ``g`` across the 0 / >0 boundary.

        A round trip (off and back on) pays one draft-KV rebuild, so each direction
        is charged half of C_switch, spread over the tokens one request gets in the
        ``horizon`` rounds the arm will be held.
        """
        if (g == 0) == self._off or self._switch_cost <= 0.0:
            return 0.0
        return 0.5 * self._switch_cost / (horizon * self._tau[c][g])

    def _pick(self, c: int, horizon: int, explore: bool) -> int:
        counts = self._count[c]
        loss = self._loss[c]
        if explore or not any(counts):
            if self._switch_cost <= 0.0 or not any(counts):
                return self._rng.randrange(self.arms)
            # Exploration stays uniform on the current side of the 0 / >0 boundary;
            # an arm across it is down-weighted by how much its toggle would add to
            # the best known loss, so a costly switch is explored less often.
            ref = min(loss[g] for g in range(self.arms) if counts[g])
            if ref <= 0.0:
                # A loss learned from a mixed step whose prefill estimate overshot can
                # reach 0; there is no scale to weigh the toggle against: uniform.
                return self._rng.randrange(self.arms)
            weights = [
                1.0 / (1.0 + self._toggle_penalty(c, g, horizon) / ref) for g in range(self.arms)
            ]
            return self._rng.choices(range(self.arms), weights)[0]
        best, best_val = 0, math.inf
        for g in range(self.arms):
            if not counts[g]:
                continue
            val = loss[g] + self._toggle_penalty(c, g, horizon)
            if val < best_val:
                best, best_val = g, val
        return best

    def observe(self, outcome: StepOutcome) -> None:
        g = outcome.gamma
        if outcome.switch_cost_s > 0.0:
            self._switch_cost += SWITCH_ALPHA * (outcome.switch_cost_s - self._switch_cost)
        if outcome.clamped or g >= self.arms:
            return  # the engine overrode the policy: the arm did not earn this
        b, emitted = outcome.batch_size, outcome.emitted
        if emitted <= 0 or b <= 0:
            return
        c = bucket_of(b)
        if c not in self._loss:
            self._context(c)
        step_s = outcome.step_time_s - outcome.switch_cost_s
        p = outcome.prefill_tokens
        if p > 0:
            if self._timed[c][g]:
                self._prefill.learn(p, step_s - self._time[c][g])
            decode_s = self._prefill.decode_time(step_s, p)
            if decode_s is None:
                return
        else:
            decode_s = step_s
            k = self._timed[c][g] + 1
            self._timed[c][g] = k
            self._time[c][g] += max(1.0 / k, ALPHA_MIN) * (step_s - self._time[c][g])
        loss = decode_s * b / emitted
        n = self._count[c][g] + 1
        self._count[c][g] = n
        w = max(1.0 / n, ALPHA_MIN)
        self._loss[c][g] += w * (loss - self._loss[c][g])
        self._tau[c][g] += w * (emitted / b - self._tau[c][g])


@register("nightjar", "the paper's contextual bandit: batch-size bucket -> gamma (loss: TPOT)")
def _nightjar(arg: str | None, env: PolicyEnv) -> Policy:
    parse_no_arg("nightjar", arg)
    return NightjarPolicy(env.gamma_max, env.seed)
