"""``oracle``: the per-step best batch gamma, knowing the hardware and every request's rate.

The yardstick for regret, not a competitor: it reads ``ctx.true_acceptance``, which
only the simulator provides, and the exact step-time model (``env.truth`` when the
others plan with a different ``--prior``, else ``env.latency``). Each
step it picks the gamma maximising expected emitted tokens over predicted step
time, ``sum_i (1 - a_i^(g+1)) / (1 - a_i) / T(B, g, context)``. It ignores the
switch cost (the draft-KV rebuild after gamma-0 steps): it is myopic by design, so
that its choice is a function of the step alone and regret stays well defined.
"""

from __future__ import annotations

import numpy as np

from nightjar.core.acceptance import MAX_ALPHA
from nightjar.core.estimators import expected_tokens_all, parse_no_arg
from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.powers import powers
from nightjar.core.types import LatencyModel, StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import register

# Where the engine has no ground truth (the live engine), the oracle falls back to
# the engine's estimates, then to this prior; it is then no longer an oracle.
FALLBACK_ALPHA = 0.7


class OraclePolicy:
    name = "oracle"
    # Asks the simulator for per-request data (request ids, estimates, true rates).
    uses_request_info = True

    def __init__(self, latency: LatencyModel, gamma_max: int, prior: float | None) -> None:
        self.latency = latency
        self.gamma_max = gamma_max
        self.prior = FALLBACK_ALPHA if prior is None else prior

    def expected_emitted(self, rates: list[float] | None, batch_size: int) -> list[float]:
        """Expected tokens the whole batch emits at g = 0..gamma_max."""
        if not rates:
            one = expected_tokens_all(min(self.prior, MAX_ALPHA), self.gamma_max)
            return [batch_size * t for t in one]
        a = np.minimum(np.asarray(rates, dtype=float), MAX_ALPHA)
        # sum_i (1 - a_i^(g+1)) / (1 - a_i), for every g at once.
        per = (1.0 - powers(a, self.gamma_max + 1)) / (1.0 - a[:, None])
        return per.sum(axis=0).tolist()  # type: ignore[no-any-return]

    def decide(self, ctx: StepContext) -> int:
        b = ctx.batch_size
        rates = ctx.true_acceptance if ctx.true_acceptance is not None else ctx.acceptance_estimates
        tokens = self.expected_emitted(list(rates) if rates is not None else None, b)
        best, best_rate = 0, -1.0
        for g in range(min(self.gamma_max, ctx.gamma_max) + 1):
            rate = tokens[g] / self.latency.step_time_s(b, g, ctx.mean_context_len)
            if rate > best_rate:
                best, best_rate = g, rate
        return best

    def observe(self, outcome: StepOutcome) -> None:
        pass


@register("oracle", "knows the profile and every request's true acceptance (the yardstick)")
def _oracle(arg: str | None, env: PolicyEnv) -> Policy:
    parse_no_arg("oracle", arg)
    # The yardstick plans with the exact hardware even when the others get a prior.
    latency = env.truth if env.truth is not None else env.latency
    if latency is None:
        raise NightjarInputError("policy 'oracle' needs a latency profile (--profile)")
    return OraclePolicy(latency, env.gamma_max, env.acceptance_prior)
