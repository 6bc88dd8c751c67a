"""Turns a scheduled step and vLLM's output for it into records and a policy outcome.

Lag convention (documented in docs/live-internals.md): the K set at step t is drafted at the
end of t and verified in t+1. A step's record reports the gamma *verified* in it
(set one step earlier), so that ``gamma``, ``drafted`` and ``accepted`` on one row
belong together, like the simulator's rows; the policy's raw choice at the step is
logged next to it as ``chosen_gamma``. Pure Python over duck-typed vLLM objects; the
sampled tokens arrive already read through :mod:`nightjar.live.vllm_family`.

A request that was verifying drafts but whose sampled tokens the output does not
carry is *unread*: its drafts count neither as drafted nor as rejected (a zero there
would teach the policy that speculation never pays), and the step log says how many.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nightjar.core.records import StepRecord
from nightjar.core.types import StepContext, StepOutcome


@dataclass(slots=True)
class _Pending:
    start: float
    ctx: StepContext
    chosen: int
    gamma: int  # K the drafter is asked for at the end of this step
    clamped: bool
    state: str


class StepStats:
    def __init__(self) -> None:
        # FIFO: with async scheduling, step t+1 is scheduled before t's output arrives.
        self._pending: deque[_Pending] = deque()
        self._per_request: dict[str, list[int]] = {}
        # vLLM's request ids as the small ints a policy's per-request state is indexed
        # by (StepContext.request_ids, StepOutcome.request_ids), stable while it runs.
        self._ids: dict[str, int] = {}
        self._next_id = 0
        self._verified_gamma = 0  # K set by the previous finished step
        self._verified_clamped = False
        # Of the last finished step: the batch its K was priced at and the requests
        # vLLM scheduled in it (the step log keeps both, to check the admission count).
        self.last_priced_batch = 0
        self.last_scheduled = 0
        self.last_unread = 0  # requests with drafts whose sampled tokens were not read

    def stable_id(self, req_id: str) -> int:
        """The request's int id: the same in every step's context and outcome."""
        found = self._ids.get(req_id)
        if found is None:
            found = self._ids[req_id] = self._next_id
            self._next_id += 1
        return found

    def begin(
        self, out: Any, ctx: StepContext, *, chosen: int, gamma: int, clamped: bool, state: str
    ) -> None:
        self._pending.append(_Pending(ctx.now, ctx, chosen, gamma, clamped, state))

    def end(
        self, out: Any, sampled: Mapping[str, Sequence[int]], num_sampled: int
    ) -> tuple[StepRecord, StepOutcome | None, float, int] | None:
        if not self._pending:
            return None
        p = self._pending.popleft()
        step_time = time.monotonic() - p.start
        self.last_priced_batch = p.ctx.batch_size
        self.last_scheduled = len(out.num_scheduled_tokens)
        spec_tokens = out.scheduled_spec_decode_tokens
        batch = prefill = drafted = accepted = unread = 0
        req_ids: list[int] = []
        per_drafted: list[int] = []
        per_accepted: list[int] = []
        for req_id, n in out.num_scheduled_tokens.items():
            k = len(spec_tokens.get(req_id, ()))
            gen = sampled.get(req_id)
            if n != 1 + k:
                prefill += n
                continue
            batch += 1
            if k and gen is None:
                unread += 1
                k = 0
            acc = max(len(gen) - num_sampled, 0) if k and gen else 0
            drafted += k
            accepted += acc
            totals = self._per_request.setdefault(req_id, [0, 0])
            totals[0] += k
            totals[1] += acc
            req_ids.append(self.stable_id(req_id))
            per_drafted.append(k)
            per_accepted.append(acc)
        self.last_unread = unread
        gamma, clamped = self._verified_gamma, self._verified_clamped
        self._verified_gamma, self._verified_clamped = p.gamma, p.clamped
        record = StepRecord(
            time_s=p.start,
            step_time_s=step_time,
            batch_size=batch,
            num_waiting=p.ctx.num_waiting,
            gamma=gamma,
            prefill_tokens=prefill,
            drafted=drafted,
            accepted=accepted,
            emitted=0,  # filled in by the scheduler, from what vLLM kept
            kv_used_blocks=0,  # filled in by the scheduler, which sees the pool
            kv_total_blocks=p.ctx.kv_total_blocks,
            draft_state=p.state,
            clamped=clamped,
            mean_context_len=p.ctx.mean_context_len if batch else float("nan"),
        )
        outcome = None
        if batch > 0:
            outcome = StepOutcome(
                gamma=gamma,
                batch_size=batch,
                step_time_s=step_time,
                drafted=drafted,
                accepted=accepted,
                emitted=0,  # likewise
                clamped=clamped,
                # The prompt chunks of a mixed step: their time is admission's, not
                # the verified gamma's (policies learn decode cost from the rest).
                prefill_tokens=prefill,
                request_ids=req_ids,
                per_request_accepted=per_accepted,
                per_request_drafted=per_drafted,
                drafting_gamma=p.gamma,
            )
        return record, outcome, p.start, p.chosen

    def pop_request(self, req_id: str) -> tuple[int, int]:
        self._ids.pop(req_id, None)
        drafted, accepted = self._per_request.pop(req_id, [0, 0])
        return drafted, accepted


def emitted_tokens(engine_outputs: Any) -> int:
    """Tokens vLLM hands its clients in one step's outputs (``update_from_output``'s)."""
    return sum(
        len(o.new_token_ids) for eco in engine_outputs.values() for o in eco.outputs
    )
