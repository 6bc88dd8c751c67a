"""``tetris``: per-request draft lengths under a batch verification budget.

After TETRIS (Wu et al., ACL 2025, "Optimal Draft Token Selection for Batch
Speculative Decoding"): the verifier has capacity for ``C = k * B`` draft tokens per
step; the j-th draft token of request i survives with probability ``a_i^j`` (all
earlier ones must be accepted), so the expected accepted tokens are maximised by
verifying the C candidates with the highest cumulative acceptance likelihood.
Because ``a_i^j`` falls with j, each request's selection is a prefix: its length.
Ties go to the request earlier in the batch (a stable sort), so decisions are
deterministic. ``k`` is the spec's argument (``tetris:2``, the default).

Rates come from ``ctx.acceptance_estimates`` when the engine has them, otherwise
from this policy's own per-request counts ``(accepted + 1) / (drafted + 2)``.
Needs per-request lengths, which vLLM does not support.
"""

from __future__ import annotations

import numpy as np

from nightjar.core.policy import Policy, PolicyEnv
from nightjar.core.powers import powers
from nightjar.core.types import StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import register

DEFAULT_K = 2.0


class TetrisPolicy:
    name = "tetris"
    # Asks the simulator for request ids and acceptance estimates.
    uses_request_info = True

    def __init__(self, k: float, gamma_max: int) -> None:
        self.k = k
        self.gamma_max = gamma_max
        # request id -> [accepted, drafted], the fallback when the engine has no estimates.
        self._counts: dict[int, list[int]] = {}

    def _rates(self, ctx: StepContext) -> np.ndarray:
        if ctx.acceptance_estimates is not None:
            return np.asarray(ctx.acceptance_estimates, dtype=float)
        ids = ctx.request_ids or []
        out = np.full(ctx.batch_size, 0.5)
        for n, rid in enumerate(ids[: ctx.batch_size]):
            acc, drafted = self._counts.get(rid, (0, 0))
            out[n] = (acc + 1.0) / (drafted + 2.0)
        return out

    def allocate(self, rates: np.ndarray, gamma_max: int) -> list[int]:
        """Lengths per request: the top ``round(k * B)`` of all ``a_i^j``, j = 1..gamma_max."""
        b = rates.shape[0]
        budget = min(round(self.k * b), b * gamma_max)
        if budget <= 0 or gamma_max <= 0:
            return [0] * b
        scores = powers(np.clip(rates, 0.0, 1.0), gamma_max)
        # Row-major flattening + stable sort: equal scores keep batch order.
        order = np.argsort(-scores.ravel(), kind="stable")[:budget]
        lengths = np.bincount(order // gamma_max, minlength=b)
        return lengths.tolist()  # type: ignore[no-any-return]

    def decide(self, ctx: StepContext) -> list[int]:
        return self.allocate(self._rates(ctx), min(self.gamma_max, ctx.gamma_max))

    def observe(self, outcome: StepOutcome) -> None:
        ids, acc, drafted = (
            outcome.request_ids, outcome.per_request_accepted, outcome.per_request_drafted,
        )
        if outcome.clamped or ids is None or acc is None or drafted is None:
            return
        for rid, a, d in zip(ids, acc, drafted, strict=False):
            c = self._counts.setdefault(rid, [0, 0])
            c[0] += a
            c[1] += d


def _parse_k(arg: str | None, gamma_max: int) -> float:
    if arg is None:
        return DEFAULT_K
    try:
        k = float(arg)
    except ValueError:
        raise NightjarInputError(f"policy 'tetris:{arg}': budget {arg!r} is not a number") from None
    if not 0.0 <= k <= gamma_max:
        raise NightjarInputError(
            f"policy 'tetris:{arg}': draft tokens per request must be in 0..{gamma_max}"
        )
    return k


@register("tetris", "per-request lengths: top k*B draft tokens by acceptance likelihood (tetris:K)")
def _tetris(arg: str | None, env: PolicyEnv) -> Policy:
    if not env.per_request:
        raise NightjarInputError(
            "tetris needs per-request speculation lengths, which vLLM does not support"
        )
    return TetrisPolicy(_parse_k(arg, env.gamma_max), env.gamma_max)
