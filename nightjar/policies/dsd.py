"""``dsd``: dynamic speculative decoding by goodput (SmartSpec; vLLM RFC #4565).

Each decision maximises predicted goodput ``B * (1 - a^(k+1)) / (1 - a) / T(B, k)``
over k = 0..gamma_max, where ``T`` is the profiled step time and ``a`` the token
acceptance rate, an EMA ``a <- 0.85 a + 0.15 a_step`` starting at 0.7, with
``a_step = accepted / drafted`` as vLLM measures it. k = 0 gets a 1.1 bias (its
goodput is multiplied by 1.1), so speculation must win by 10% to run. The
acceptance-driven choice is re-made every 20 steps: chosen k's are cached per batch
size and the cache is dropped every 20 steps (a new batch size is decided at once,
since the argmax depends on it). KV guard: when requests wait for memory, or fewer
than ``KV_GUARD_FRACTION`` of the KV blocks are free, k = 0 so that speculative
slots do not crowd out the queue.
"""

from __future__ import annotations

from nightjar.core.estimators import expected_tokens_all, parse_no_arg
from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.types import LatencyModel, StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import register

EMA_KEEP = 0.85
INITIAL_ALPHA = 0.7
REDECIDE_STEPS = 20
NOSPEC_BIAS = 1.1
KV_GUARD_FRACTION = 0.05


class DsdPolicy:
    name = "dsd"

    def __init__(self, latency: LatencyModel, gamma_max: int) -> None:
        self.latency = latency
        self.gamma_max = gamma_max
        self.alpha = INITIAL_ALPHA
        self._tokens = expected_tokens_all(self.alpha, gamma_max)
        self._cache: dict[int, int] = {}
        self._steps = 0

    def goodput(self, batch_size: int, k: int, context_len: float) -> float:
        """Predicted tokens per second at speculation length ``k`` (biased for k = 0)."""
        rate = batch_size * self._tokens[k] / self.latency.step_time_s(batch_size, k, context_len)
        return rate * NOSPEC_BIAS if k == 0 else rate

    def decide(self, ctx: StepContext) -> int:
        self._steps += 1
        if self._steps % REDECIDE_STEPS == 0:
            self._tokens = expected_tokens_all(self.alpha, self.gamma_max)
            self._cache.clear()
        if ctx.num_waiting > 0 or ctx.kv_free_blocks < KV_GUARD_FRACTION * ctx.kv_total_blocks:
            return 0
        b = ctx.batch_size
        k = self._cache.get(b)
        if k is None:
            top = min(self.gamma_max, ctx.gamma_max)
            k = max(range(top + 1), key=lambda g: self.goodput(b, g, ctx.mean_context_len))
            self._cache[b] = k
        return k

    def observe(self, outcome: StepOutcome) -> None:
        if outcome.clamped or outcome.drafted <= 0:
            return
        a_step = outcome.accepted / outcome.drafted
        self.alpha = EMA_KEEP * self.alpha + (1.0 - EMA_KEEP) * a_step


@register("dsd", "goodput-maximising gamma from the profile (SmartSpec / vLLM RFC #4565)")
def _dsd(arg: str | None, env: PolicyEnv) -> Policy:
    parse_no_arg("dsd", arg)
    if env.latency is None:
        raise NightjarInputError("policy 'dsd' plans with a latency table: give a --prior other "
                                 "than none (and a --profile)")
    return DsdPolicy(env.latency, env.gamma_max)
