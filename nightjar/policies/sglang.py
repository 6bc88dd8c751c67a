"""``sglang``: SGLang's adaptive ``speculative_num_steps``, per batch-size bucket.

After SGLang's ``AdaptiveSpeculativeParams`` (sgl-project/sglang PR #21599, made
batch-size aware in #24055): an EMA (weight 0.2) of the accepted draft length per
request; after 10 warm-up batches, every 5 batches the current step count moves
down the candidate list while ``ema <= prev - 0.5 + down_hysteresis`` and up while
``ema > cur - 0.5 + up_hysteresis`` (down 0.0, up -0.25). The EMA starts at
``initial - 1``. Candidates default to SGLang's ``[1, 3, 7]`` clipped to
gamma_max (``[1, 3, 4]`` for gamma_max 4); ``sglang:1,2,4`` sets them. Like SGLang
it never turns speculation off. We keep one such state per power-of-two batch-size
bucket, updated by the steps that ran in that bucket.
"""

from __future__ import annotations

from dataclasses import dataclass

from nightjar.core.estimators import bucket_of
from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import register

DEFAULT_CANDIDATES = (1, 3, 7)
EMA_ALPHA = 0.2
UPDATE_INTERVAL = 5
WARMUP_BATCHES = 10
DOWN_HYSTERESIS = 0.0
UP_HYSTERESIS = -0.25
# SGLang's usual --speculative-num-steps; the start is the candidate nearest to it.
INITIAL_STEPS = 3


@dataclass(slots=True)
class _State:
    idx: int  # index into the candidate list
    ema: float
    batches: int = 0


class SglangPolicy:
    name = "sglang"

    def __init__(self, candidates: list[int]) -> None:
        self.candidates = candidates
        self._start = min(
            range(len(candidates)), key=lambda i: (abs(candidates[i] - INITIAL_STEPS), -i)
        )
        self._states: dict[int, _State] = {}

    def _state(self, c: int) -> _State:
        st = self._states.get(c)
        if st is None:
            first = self.candidates[self._start]
            st = self._states[c] = _State(self._start, float(first - 1))
        return st

    def decide(self, ctx: StepContext) -> int:
        return self.candidates[self._state(bucket_of(ctx.batch_size)).idx]

    def observe(self, outcome: StepOutcome) -> None:
        if outcome.clamped or outcome.gamma <= 0 or outcome.batch_size <= 0:
            return
        st = self._state(bucket_of(outcome.batch_size))
        st.ema += EMA_ALPHA * (outcome.accepted / outcome.batch_size - st.ema)
        st.batches += 1
        if st.batches <= WARMUP_BATCHES or (st.batches - WARMUP_BATCHES) % UPDATE_INTERVAL:
            return
        cand = self.candidates
        while st.idx > 0 and st.ema <= cand[st.idx - 1] - 0.5 + DOWN_HYSTERESIS:
            st.idx -= 1
        while st.idx < len(cand) - 1 and st.ema > cand[st.idx] - 0.5 + UP_HYSTERESIS:
            st.idx += 1


def parse_candidates(arg: str | None, gamma_max: int) -> list[int]:
    if arg is None:
        return sorted({min(c, gamma_max) for c in DEFAULT_CANDIDATES if gamma_max > 0}) or [0]
    try:
        values = sorted({int(x) for x in arg.split(",")})
    except ValueError:
        raise NightjarInputError(
            f"policy 'sglang:{arg}': candidates must be comma-separated integers, e.g. 1,3,4"
        ) from None
    if not values or values[0] < 1 or values[-1] > gamma_max:
        raise NightjarInputError(
            f"policy 'sglang:{arg}': candidates must lie in 1..{gamma_max} (gamma_max)"
        )
    return values


@register("sglang", "SGLang's adaptive steps: EMA of accepted length per batch-size bucket")
def _sglang(arg: str | None, env: PolicyEnv) -> Policy:
    return SglangPolicy(parse_candidates(arg, env.gamma_max))
