"""What ``nightjar+`` optimises, and the KV-pressure limits on its choice.

Two objectives, named by the policy spec's argument (``nightjar+``, ``nightjar+:slo``,
``nightjar+:slo=TTFT,TPOT``):

- ``latency`` (the default): the least predicted per-token latency of the running
  batch, ``T(B, g) / tau(g)``.
- ``slo``: goodput under a TTFT and a TPOT limit. A request counts only if both
  hold, so latency below the TPOT limit buys nothing while the waiting requests'
  TTFT is at stake. With requests waiting for a *step* (the pool has room for
  them: admission is limited by the step's token budget and by how often steps
  come), the policy takes the shortest step whose per-token latency still meets
  the TPOT limit: speculation's verify tokens eat the prefill budget and its draft
  passes lengthen the step, both of which delay first tokens. With nothing waiting,
  or with the queue waiting for *blocks* (capacity binds: blocks free only as the
  running requests finish, so the batch's own throughput is what admits them),
  it is the latency objective. The TTFT limit does not enter the decision: any
  waiting request is taken to be at risk, since the policy sees no per-request
  waiting times (a ``StepContext`` field for the queue head's age would let it).

The KV-pressure limit applies to both: gamma ``g`` reserves ``B * (g + 1)`` token
slots this step; where the free blocks cannot hold them the engine preempts a
running request (a recompute of its whole context, far dearer than any per-token
gain), so lengths whose lookahead does not fit are not chosen.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from nightjar.core.slo import Slo
from nightjar.core.types import StepContext
from nightjar.errors import NightjarInputError


@dataclass(frozen=True, slots=True)
class Objective:
    """``slo`` is None for the latency objective."""

    slo: Slo | None = None

    @property
    def name(self) -> str:
        return "latency" if self.slo is None else "slo"


def parse_objective(policy: str, arg: str | None) -> Objective:
    """``None``/``latency``, ``slo`` (the default limits of :class:`Slo`, the same as
    ``nightjar sim``'s) or ``slo=TTFT,TPOT`` in seconds; anything else is an input error."""
    if arg is None or arg == "latency":
        return Objective()
    if arg == "slo":
        return Objective(Slo())
    if arg.startswith("slo="):
        parts = arg[4:].split(",")
        try:
            if len(parts) != 2:
                raise ValueError("need two limits")
            ttft, tpot = (float(p) for p in parts)
            return Objective(Slo(ttft_s=ttft, tpot_s=tpot))
        except ValueError as exc:
            raise NightjarInputError(
                f"policy {policy!r}: objective {arg!r} must be slo=TTFT_S,TPOT_S with "
                f"finite positive seconds ({exc})"
            ) from None
    raise NightjarInputError(
        f"policy {policy!r}: unknown objective {arg!r} "
        "(known: latency, slo, slo=TTFT_S,TPOT_S, batch-keyed, kv-limit)"
    )


def lookahead_top(ctx: StepContext, top: int) -> int:
    """How many lengths (0..top-1) fit the free blocks' lookahead; at least gamma 0.

    ``B * (g + 1)`` new tokens need about that many slots over the batch (each
    request crosses into a new block where its tail runs out); without a block size
    the engine has not said, and nothing is limited.
    """
    bs = ctx.kv_block_size
    if bs <= 0 or ctx.batch_size <= 0:
        return top
    slots = ctx.kv_free_blocks * bs
    fits = slots // ctx.batch_size  # tokens per request the pool can still take
    return max(1, min(top, fits))  # fits tokens = gammas 0..fits-1


def capacity_binds(ctx: StepContext) -> bool:
    """The waiting queue needs more blocks than are free (unknown block size: no)."""
    return ctx.kv_block_size > 0 and ctx.waiting_blocks > ctx.kv_free_blocks


def slo_choice(
    objective: Objective,
    ctx: StepContext,
    per_token: list[float],
    step: list[float],
    top: int,
) -> int | None:
    """The SLO objective's pick among gammas ``0..top-1``, or None to use latency.

    ``per_token`` and ``step`` are the predicted per-token and per-step seconds.
    """
    slo = objective.slo
    if slo is None or ctx.num_waiting == 0 or capacity_binds(ctx):
        return None
    ok = [g for g in range(top) if per_token[g] <= slo.tpot_s and math.isfinite(step[g])]
    if not ok:
        return None
    return min(ok, key=lambda g: (step[g], g))
