"""One simulated engine: a simpy process that runs schedule -> run -> postprocess.

Each step the engine (1) pulls arrivals into the FCFS waiting queue, (2) asks the
policy for gamma for the decoding requests, (3) grows their KV for
``ctx + gamma + 1`` tokens, preempting the newest by recompute when blocks run out,
(4) fills the rest of the step's token budget with prompt tokens (``SchedulerMode``:
V1 continues a partial prefill, then admits waiting prompts FCFS, the last one in
chunks when it does not fit; V0 runs whole-prompt prefill steps that decode
nothing), none after a preemption, as vLLM, (5) charges the step's latency from the
profile and (6) applies the sampled outcome when the step ends.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from math import inf
from typing import Any

import numpy as np
import simpy

from nightjar.core.admission import Limits, Room, admit, step_batch
from nightjar.core.drafter import drafter_kind
from nightjar.core.driver import StepDriver
from nightjar.core.policy import Policy
from nightjar.core.records import StepRecord
from nightjar.core.types import Decision, StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import spec_needs_draft
from nightjar.profile.profile import Profile
from nightjar.sim.acceptance import MAX_ALPHA, MIN_ALPHA, AcceptanceDraws
from nightjar.sim.batch import (
    ACCEPTED,
    BLOCKS,
    CTX,
    DRAFTED,
    LAG,
    NEG_LEFT,
    RID,
    TODO,
    RunningBatch,
)
from nightjar.sim.draft import DRAIN_TIMEOUT_S, DraftMemory
from nightjar.sim.knobs import DraftKVMode, SchedulerMode, SimConfig
from nightjar.sim.kv import BlockPool
from nightjar.sim.ledger import Ledger
from nightjar.sim.no_draft import NoDraft
from nightjar.sim.price import StepPricer
from nightjar.sim.waiting import WaitingQueue
from nightjar.sim.yardstick import Recorder

# An idle engine (requests waiting, none admissible, nothing running) looks again
# after this much simulated time, like a server's scheduler loop polling.
IDLE_POLL_S = 0.01


class SimulationStalled(NightjarInputError):
    """The engine cannot make progress: nothing runs and nothing can be admitted."""


class Engine:
    def __init__(
        self,
        env: simpy.Environment,
        ledger: Ledger,
        profile: Profile,
        policy: Policy,
        config: SimConfig,
        on_step: Callable[[float], None] | None = None,
    ) -> None:
        self.env = env
        self.ledger = ledger
        self.profile = profile
        self.cfg = config
        self.block_size = profile.memory.block_size
        self._v1 = config.engine is SchedulerMode.V1
        # A policy that never speculates is served with no draft loaded, as a real
        # server would be: the whole pool for the target and nothing to offload.
        with_draft = spec_needs_draft(getattr(policy, "name", ""))
        # vLLM V1 with a draft model reserves one more token of the step's input
        # budget per scheduled request, decoding or prefilling
        # (``SpeculativeConfig.max_num_new_slots_for_drafting``: 1 for draft_model):
        # live mixed steps of B decodes at gamma 3 carry 2048 - B(3 + 2) - (prompts)
        # prompt tokens. The paper's V0 engine has no such term.
        # Other drafters reserve none (nightjar.core.drafter: ``draft_slots``).
        kind = drafter_kind(profile.drafter)
        self.draft_slots = kind.draft_slots if with_draft and self._v1 else 0
        # A lookup drafter (n-gram, suffix) keeps no KV: nothing goes stale at gamma 0,
        # no catch-up when speculation returns, nothing to keep in sync.
        self._draft_has_kv = kind.has_kv
        self._sync = self._draft_has_kv and config.draft_kv_mode is DraftKVMode.SYNC
        # What the step loop reads per request as Python values (a numpy scalar read
        # costs ten times a list's).
        self._prompt: list[int] = ledger.prompt.tolist()
        self._output: list[int] = ledger.output.tolist()

        # -- what is scheduled: the waiting queue, the running batch, the KV pool, the
        # draft's memory and the policy's decision (the driver runs decide -> memory
        # -> clamp -> observe).
        self.queue = WaitingQueue(ledger.arrival_s.tolist(), self._prompt)
        # Sized by what runs, not by what the cap claims: the batch grows on demand, so
        # --max-num-seqs 10**9 costs nothing until 10**9 requests run at once.
        self.batch = RunningBatch(min(config.max_num_seqs, 1024))
        self.pool = BlockPool(profile.memory.kv_blocks(draft_resident=with_draft))
        self.draft: DraftMemory | NoDraft = (
            DraftMemory(env, self.pool, profile, config) if with_draft
            else NoDraft(lambda: float(env.now))
        )
        self.driver = StepDriver(policy, self.draft.controller, profile)
        self._limits = Limits(
            max_num_batched_tokens=config.max_num_batched_tokens,
            max_num_seqs=config.max_num_seqs,
            block_size=self.block_size,
            draft_slots=self.draft_slots,
        )
        self.wants_requests = bool(getattr(policy, "uses_request_info", False))
        # A policy that reads nothing of its context, with no memory controller that
        # reads the batch, is told the decoding count: every count above 0 gives the
        # same step, and counting what a step admits is a pass over the queue.
        self._count_batch = not getattr(policy, "ignores_context", False) or config.offload
        # Kept as the batch changes rather than recomputed each step: the sum of the
        # decoding requests' contexts (their mean for the policy and the price), whether
        # every running request's draft lag is 0 (so a speculative step has no catch-up
        # to count or clear), and the largest gamma any block reservation was made
        # for (at or above it, no request holds more blocks than it needs).
        self._ctx_sum = 0
        self._lag_zero = True
        self._reserved_g = 0
        # Idle longer than this with no transfer under way means no event can ever
        # admit the head of the queue: the longest the memory controller may hold
        # the draft (dwell, hold, drain), plus a second. run() refuses to go on.
        mem = config.memory
        self.stall_limit_s = mem.max_dwell_s + mem.reload_hold_s + DRAIN_TIMEOUT_S + 1.0

        # -- what is priced: the step's duration from the profile.
        self._pricer = StepPricer(profile)  # price_step, its prefill curves memoised
        # When the last step that ran a request ended: the idle time before the next
        # one is what the profile's wake table prices (before the first: inf, as live,
        # where the engine waits idle for the run's first request).
        self._last_end = -inf
        # Batch sizes and contexts outside the profile's table are priced at its edge,
        # or past its largest batch along its last segment (Profile.clamp, shared with
        # the policies and the memory controller), and counted
        # (``context_clamped_steps`` in the run's summary).
        self.context_clamped_steps = 0
        self._draft_prefilled = False  # the draft ran over this step's prompt chunks

        # -- what is drawn: the accepted drafts, from each request's acceptance rate.
        self.draws = AcceptanceDraws(config.seed, config.acceptance_model,
                                     config.positional_decay)
        self._log_alpha = np.log(np.clip(ledger.alpha, MIN_ALPHA, MAX_ALPHA))

        # -- what is recorded: the steps, and the run's trajectory for the regret
        # bound (nightjar.sim.yardstick); per-request history is in the ledger.
        self.steps: list[StepRecord] = []
        self.on_step = on_step
        self._moved = False  # the last step emitted or prefilled a token
        self.yardstick = Recorder(
            profile, config.gamma_max,
            # A lookup drafter has nothing to rebuild after gamma 0.
            skip=self._draft_has_kv and config.draft_kv_mode is DraftKVMode.SKIP,
            positional_decay=config.positional_decay,
            positional=not self.draws.is_geometric,
            alpha=ledger.alpha,
            no_spec=ledger.no_spec,
            max_batch=config.max_num_seqs,
        )

    # -- the simpy process -------------------------------------------------------
    def run(self) -> Generator[simpy.Event, Any, None]:
        queue, waiting = self.queue, self.queue.order
        n = len(queue.arrivals)
        env, ledger, batch = self.env, self.ledger, self.batch
        idle_since: float | None = None
        # simpy.Environment keeps its clock in ``_now`` (simpy 4); without it, every
        # step goes through the event queue.
        fast = type(env) is simpy.Environment and isinstance(
            getattr(env, "_now", None), float | int
        )
        while ledger.finished < n:
            now = env.now
            queue.arrive(now)
            if not batch.n and not waiting:
                yield env.timeout(queue.next_arrival_s() - now)
                continue
            running = batch.n
            step_time = self._step(now)
            # A step that preempted its whole batch is followed at once by one that
            # admits or finds the engine idle, so only a step that started idle waits.
            if step_time > 0.0 or running or self._moved:
                idle_since = None
                end = now + step_time
                if fast and env.peek() > end:
                    # Nothing else happens before the step ends (no transfer finishes,
                    # no stop), so the clock moves as simpy's own timeout would move it
                    # (same sum, same order of events) without a trip through its queue.
                    env._now = end
                else:
                    yield env.timeout(step_time)
                if self.on_step is not None:
                    self.on_step(env.now)
                continue
            # The watchdog: a step that took no time and moved no token. Nothing runs
            # and the head of the queue cannot be admitted (a draft transfer or a
            # drain holds the blocks it needs), so wait for the next event instead
            # of spinning at the same instant.
            idle_since = now if idle_since is None else idle_since
            yield env.timeout(self._idle_wait(now, idle_since))

    def _idle_wait(self, now: float, idle_since: float) -> float:
        """Simulated seconds an idle engine waits: to the next arrival or transfer,
        at most one poll (the memory controller's dwell is counted in time)."""
        pending = self.env.peek()  # a draft transfer's completion, if one is under way
        arrival = self.queue.next_arrival_s()
        if pending == inf and now - idle_since > self.stall_limit_s:
            waiting = self.queue.order
            head = waiting[0] if waiting else -1
            tokens = int(self.ledger.prompt[head] + self.ledger.generated[head]) if head >= 0 else 0
            raise SimulationStalled(
                f"simulation stalled at {now:.3f} s: request {head} ({tokens} tokens) waits "
                f"for KV blocks the pool ({self.pool.free} free of {self.pool.total}) cannot "
                f"give it, with nothing running for {now - idle_since:.1f} s"
            )
        return max(0.0, min(pending, arrival, now + IDLE_POLL_S) - now)

    # -- one step -----------------------------------------------------------------
    def _context(
        self, now: float, n: int, batch: int | None = None,
        mean_ctx: float = 0.0, max_ctx: float = 0.0,
    ) -> StepContext:
        """What the policy sees. ``batch``: the requests the step runs (the batch its
        gamma is priced at, ``n`` when not given); contexts, ids and acceptance are
        those of the ``n`` decoding requests (the ones the gamma applies to), whose
        mean and largest context the caller passes."""
        ids = true_acc = est = None
        if self.wants_requests and n:
            state = self.batch.state
            rid = state[RID, :n]
            ids = rid.tolist()
            true_acc = self.ledger.alpha[rid].tolist()
            est = ((state[ACCEPTED, :n] + 1.0) / (state[DRAFTED, :n] + 2.0)).tolist()
        pool, queue = self.pool, self.queue
        # Positional, in the field order (keywords cost a third of building it; a
        # test checks the order: tests/test_sim_engine.py).
        return StepContext(
            now,  # now
            n if batch is None else batch,  # batch_size
            len(queue.order),  # num_waiting
            pool.free,  # kv_free_blocks
            pool.total - pool.reclaim_pending,  # kv_total_blocks
            self.draft.resident,  # draft_resident
            self.cfg.gamma_max,  # gamma_max
            mean_ctx,  # mean_context_len
            ids,  # request_ids
            est,  # acceptance_estimates
            queue.rate_rps,  # arrival_rate_rps (as of the arrivals at ``now``)
            true_acc,  # true_acceptance
            max_ctx,  # max_context_len
            queue.preempted,  # num_preempted_waiting
            queue.tokens,  # waiting_tokens
            self.block_size,  # kv_block_size
            self.cfg.max_num_seqs,  # max_num_seqs
            # (only the memory controller reads it: a sum over the prefilling rows)
            int(self.batch.state[TODO, n : self.batch.n].sum())
            if self.cfg.offload and self.batch.n > n else 0,
        )

    def _step(self, now: float) -> float:
        """Schedule, price, apply and record one step; returns its duration."""
        if not self._v1 and self.queue.order:
            step_s = self._prefill_only(now)
            if step_s is not None:
                return step_s
        b = self.batch
        n = b.n_decode
        # The mean context of the decoding requests, from the integer sum (exactly
        # numpy's mean of the int column), and the largest.
        top = float(np.maximum.reduce(b.state[CTX, :n])) if n else 0.0
        batch = self._step_batch(n) if self._count_batch or not n else n
        ctx = self._context(now, n, batch, self._ctx_sum / n if n else 0.0, top)
        step = self.driver.plan(ctx)
        before = b.n
        self.draft.start(step.action, self._preempt_last, self._forget_draft_kv)
        n = min(n, b.n)
        gam = self._gammas(step.decision, n)
        gam, n, g_max, cut = self._grow_kv(gam, n)
        preempted = b.n < before
        drafted = gam * n if isinstance(gam, int) else int(gam.sum())
        chunks: list[int] = []
        if self._v1:
            slots = self.draft_slots
            budget = self.cfg.max_num_batched_tokens - drafted - n * (1 + slots)
            if b.n > n:
                chunks = self._continue_prefill(n, budget)
            # Admission only once every partial prefill got its chunk (vLLM serves
            # the running queue before the waiting one).
            if not preempted and len(chunks) == b.n - n and self.queue.order:
                left = budget - sum(chunks) - slots * len(chunks)
                chunks += self._admit(left, extra=slots)
        # The K the draft proposes for this step's prompts: g_max, except in a V1
        # prefill-only step, where the policy chose it for the prompts the step
        # carries (vLLM's drafter runs at the end of that step, so its passes are in
        # their first token's time).
        prompt_gamma, prompts_done = g_max, 0
        if not n:
            prompt_gamma = _largest(step.decision)
            if chunks:
                todo = b.state[TODO, : len(chunks)].tolist()
                prompts_done = sum(c == t for c, t in zip(chunks, todo, strict=True))
        return self._run(
            now, n, gam, g_max, drafted, step.clamped or cut, chunks, n,
            self._ctx_sum / n if n else 0.0, prompt_gamma, prompts_done,
        )

    def _step_batch(self, n: int) -> int:
        """V1: the running requests plus the waiting ones this step will admit
        (``nightjar.core.admission.step_batch``, the live scheduler's count too), as if
        the decodes took no drafts: gamma is not chosen yet. The live engine prices
        K at this batch because its drafter proposes for every request in the step;
        the simulator asks with the same count so that both policies see one batch.
        It can admit one fewer when the chosen drafts take the budget's last tokens.

        A step with no decoding request counts the prompts it prefills (the partial
        ones and what it admits): vLLM's scheduler asks for K on every step and its
        drafter proposes K tokens for each prompt that completes, at the end of the
        step that emits the prompt's first token. The simulator asks too and prices
        those draft passes in that step (``prompt_gamma`` of :meth:`_run`); nothing is
        verified there, so the policy gets no outcome for it, as live. Not with
        ``--offload on``: there such a step keeps 0 and the policy is not asked, which
        leaves the memory controller free to offload during a stretch of prompt-only
        steps (a prompt that fits only without the draft gets its room that way)."""
        if not self._v1 or (not n and self.cfg.offload):
            return n
        b = self.batch
        if not self.queue.order and n:  # nothing to admit: every running request (cheap)
            return b.n
        prefilling = b.state[TODO, n : b.n].tolist()
        pending = self.queue.pending_tokens()
        return step_batch(prefilling, pending, self.pool.free, self._limits, decodes=n)

    def _prefill_only(self, now: float) -> float | None:
        """V0: a step that prefills whole admitted prompts and decodes nothing, or None
        when no waiting prompt fits (the step then decodes)."""
        b = self.batch
        n = b.n
        chunks = self._admit(self.cfg.max_num_batched_tokens, whole=True)
        if not chunks:
            return None
        # The step runs no decode: the policy is not asked, the controller still steps.
        ctx = self._context(now, 0)
        step = self.driver.plan(ctx)
        self.draft.start(step.action, self._preempt_last, self._forget_draft_kv)
        n = min(n, b.n)
        chunks = chunks[: b.n - n]  # a reload may have preempted admissions
        if not chunks:
            return None
        return self._run(now, 0, 0, 0, 0, False, chunks, n, 0.0)

    def _run(
        self, now: float, n: int, gam: int | np.ndarray, g_max: int, drafted: int,
        clamped: bool, chunks: list[int], prefill_from: int, mean_ctx: float,
        prompt_gamma: int = 0, prompts_done: int = 0,
    ) -> float:
        """Price the planned step, apply its sampled outcome, record it.

        The first ``n`` running requests decode at ``gam`` (one length for all, or one
        each); ``chunks[j]`` prompt tokens are prefilled by request
        ``prefill_from + j``. ``prompt_gamma`` is the K the draft proposes for the
        step's prompts (``g_max`` when it decodes), ``prompts_done`` how many of them
        complete in this step."""
        b, state = self.batch, self.batch.state
        prefill = sum(chunks)
        # -- latency: the step's duration and the part that was the draft's catch-up
        lag = 0
        if g_max > 0 and not self._lag_zero and self._draft_has_kv:
            if isinstance(gam, int):  # every decoding request speculates
                lag = int(np.add.reduce(state[LAG, :n]))
            else:
                lag = int(state[LAG, :n][gam > 0].sum())
        resident = self.draft.resident
        price = self._pricer.price(
            n, g_max, drafted, mean_ctx, prefill, resident, self._sync, lag,
            prompt_gamma if not n else g_max, prompts_done, now - self._last_end,
        )
        self._draft_prefilled = price.draft_prefilled
        if price.off_grid:  # priced at a table's edge (Profile.clamp, mixed_off_grid)
            self.context_clamped_steps += 1
        overhead_s = self.draft.take_step_overhead_s()
        step_s = float(price.total_s + overhead_s)
        switch_s = float(price.switch_s)
        end = now + step_s
        if n or prefill:
            self._last_end = end
        # -- the sampled outcome, applied at the step's end
        accepted = emitted = 0
        ids = per_acc = per_drafted = None
        if n:
            # The bound's record, while the batch is the step's.
            rids, no_spec = state[RID, :n], self.ledger.no_spec
            self.yardstick.step(
                rids=rids, neg_left=state[NEG_LEFT, :n],
                speculates=~no_spec[rids] if no_spec is not None else None,
                gammas=gam,
                mean_ctx=mean_ctx, prefill_tokens=prefill, draft_loaded=resident,
                sync=self._sync, overhead_s=overhead_s, step_s=step_s, switch_s=switch_s,
            )
            acc = self._accept(n, gam)
            # Each decoding request emits its accepted drafts plus one, capped at what
            # it has left: the cap is applied by _finish, to the requests that finish
            # now (only their last step can overshoot), so CTX and NEG_LEFT move
            # together here in one operation.
            out = acc + 1
            state[CTX : NEG_LEFT + 1, :n] += out
            state[DRAFTED, :n] += gam
            state[ACCEPTED, :n] += acc
            accepted = int(np.add.reduce(acc))
            emitted = accepted + n
            self._ctx_sum += emitted
            self._update_lag(n, gam, out, resident and self._sync)
            if self.wants_requests:
                ids = state[RID, :n].tolist()
                per_acc = acc.tolist()
                per_drafted = [gam] * n if isinstance(gam, int) else gam.tolist()
        if chunks:
            self._prefilled(prefill_from, chunks, end, decode_step=n > 0)
        size = b.n
        if size and np.maximum.reduce(state[NEG_LEFT, :size]) >= 0:
            emitted -= self._finish(state[NEG_LEFT, :size] >= 0, end, n)
        self.draft.after_step(self._preempt_last)
        # -- the record, and the report to the policy
        pool = self.pool
        self._moved = bool(emitted or prefill)
        # A prefill-only step verifies nothing; its row keeps the K its draft proposed
        # for the prompts (gamma statistics skip such steps: nightjar.results.metrics).
        self.steps.append(StepRecord(
            now, step_s, n, len(self.queue.order), g_max if n else prompt_gamma, prefill,
            drafted, accepted, emitted,
            pool.used, pool.total - pool.reclaim_pending, self.draft.state_name, switch_s,
            clamped, mean_ctx,
        ))
        if n:
            # Positional, in the field order (gamma, batch_size, step_time_s, drafted,
            # accepted, emitted, switch_cost_s, clamped, prefill_tokens, request_ids,
            # per_request_accepted, per_request_drafted), as the context above.
            self.driver.finish(StepOutcome(
                g_max, n, step_s, drafted, accepted, emitted, switch_s, clamped, prefill,
                ids, per_acc, per_drafted,
            ))
        return step_s

    def _update_lag(
        self, n: int, gam: int | np.ndarray, out: np.ndarray, keep_sync: bool
    ) -> None:
        """The draft's lag after a decode: cleared where it speculated, grown by the
        emitted tokens where it sat out (unless it is kept in sync)."""
        state = self.batch.state
        if isinstance(gam, int):
            if gam > 0:
                if not self._lag_zero:
                    state[LAG, :n] = 0
                    self._lag_zero = not state[LAG, : self.batch.n].any()
            elif not keep_sync:
                state[LAG, :n] += out
                self._lag_zero = False
            return
        lags = state[LAG, :n]
        if not self._lag_zero:
            lags[gam > 0] = 0
        if not keep_sync:
            zero = gam == 0
            if zero.any():
                lags[zero] += out[zero]
                self._lag_zero = False

    def _accept(self, n: int, gam: int | np.ndarray) -> np.ndarray:
        """Accepted drafts of the ``n`` decoding requests, drawn by the run's
        :class:`AcceptanceDraws` (``log(alpha)`` kept per running request)."""
        draws = self.draws
        if draws.is_geometric:
            return draws.geometric(gam, self.batch.log_alpha[:n])
        return draws.positional(gam, self.ledger.alpha[self.batch.state[RID, :n]])

    def _prefilled(self, start: int, chunks: list[int], end: float, *, decode_step: bool
                   ) -> None:
        """Advance the prefilling requests; a finished prefill emits the first token."""
        state, first = self.batch.state, self.ledger.first_token_s
        self.yardstick.prefilled(
            state[RID, start : start + len(chunks)].tolist(), chunks, decode_step=decode_step
        )
        lagging = not self._draft_prefilled
        if lagging:
            self._lag_zero = False
        ready = 0
        for i, take in enumerate(chunks, start):
            state[CTX, i] += take
            state[TODO, i] -= take
            if lagging:
                state[LAG, i] += take
            if state[TODO, i] == 0:
                ready += 1
                rid = int(state[RID, i])
                self.yardstick.joined(rid)
                if first[rid] != first[rid]:  # NaN: the request's first token ever
                    first[rid] = end
                state[NEG_LEFT, i] += 1
                state[CTX, i] += 1
                self._ctx_sum += int(state[CTX, i])  # it decodes from now on
        # Only the last chunk can be partial (it took the rest of the budget), so the
        # finished prefills extend the decoding prefix.
        self.batch.n_decode = start + ready

    def _finish(self, done: np.ndarray, end: float, n: int) -> int:
        """Retire the running requests where ``done``: history back to the ledger.

        The first ``n`` requests decoded this step without the cap at their output
        length: a finished one's ``NEG_LEFT`` (>= 0) is how far it overshot. Returns
        the overshoot summed, the tokens the step did not emit after all."""
        b, led = self.batch, self.ledger
        where = done.nonzero()[0]
        if where.size == 1:  # the common case: one request, scalar writes
            return self._finish_one(int(where[0]), end, n)
        cols = b.state[:, : b.n][:, done]  # a copy, in batch order
        rid = cols[RID]
        neg = cols[NEG_LEFT]
        decoded = int(np.count_nonzero(done[:n]))  # the first columns decoded
        over = int(neg[:decoded].sum())
        neg[:decoded] = 0  # capped: they generated exactly their output
        self.yardstick.left(rid)
        led.finish_s[rid] = end
        led.generated[rid] = led.output[rid] + neg
        led.drafted[rid] = cols[DRAFTED]
        led.accepted[rid] = cols[ACCEPTED]
        led.finished += int(rid.size)
        self._ctx_sum -= int(cols[CTX, : int(np.count_nonzero(done[: b.n_decode]))].sum())
        self.pool.release(int(cols[BLOCKS].sum()))
        b.keep(~done)
        return over

    def _finish_one(self, i: int, end: float, n: int) -> int:
        b, led = self.batch, self.ledger
        col = b.state[:, i].tolist()
        rid = col[RID]
        over = col[NEG_LEFT] if i < n else 0
        self.yardstick.left(rid)
        led.finish_s[rid] = end
        led.generated[rid] = self._output[rid] + col[NEG_LEFT] - over
        led.drafted[rid] = col[DRAFTED]
        led.accepted[rid] = col[ACCEPTED]
        led.finished += 1
        if i < b.n_decode:
            self._ctx_sum -= col[CTX]
        self.pool.release(col[BLOCKS])
        b.remove(i)
        return over

    def _gammas(self, decision: Decision, n: int) -> int | np.ndarray:
        """The decoding requests' lengths: one int while they all share it."""
        no_spec = self.ledger.no_spec
        if isinstance(decision, int):
            if no_spec is None:
                return decision
            gammas = np.full(n, decision, dtype=np.int64)
        else:
            # The batch may have shrunk since the decision (preemption for a reload);
            # the preempted requests are the tail.
            gammas = np.array(decision[:n], dtype=np.int64)  # a copy: opt-outs edit it
        if no_spec is not None:
            # Opted-out requests decode without speculation (vLLM: no spec tokens).
            gammas[no_spec[self.batch.state[RID, :n]]] = 0
        return gammas

    def _forget_draft_kv(self) -> None:
        """The draft is leaving: its KV cache is gone and must be rebuilt on return."""
        state, n = self.batch.state, self.batch.n
        state[LAG, :n] = state[CTX, :n]
        self._lag_zero = not n

    def _grow_kv(
        self, gam: int | np.ndarray, n: int
    ) -> tuple[int | np.ndarray, int, int, bool]:
        """Reserve blocks for ``ctx + gamma + 1`` tokens of the ``n`` decoding requests;
        preempt the newest (prefilling requests first) if short.

        Returns the lengths (the lookahead cut may shorten one), the decoding requests
        left, the largest length among them, and whether the lookahead was cut: the
        cut overrides the policy's gamma, so the step is reported ``clamped`` and
        learning policies skip it.
        """
        b, pool, bs, state = self.batch, self.pool, self.block_size, self.batch.state
        if not b.n:
            return gam, 0, 0, False
        # Blocks each request needs beyond what it holds: ceil((ctx + gamma + 1) / bs).
        # A request holds more only if it reserved for a longer gamma before (its
        # context never shrinks), so at or above every earlier length none is negative.
        if isinstance(gam, int):
            need = state[CTX, :n] + (gam + bs)
            need //= bs
            need -= state[BLOCKS, :n]
            if gam < self._reserved_g:
                np.maximum(need, 0, out=need)
            elif n:
                self._reserved_g = gam
        else:
            need = state[CTX, :n] + gam
            need += bs
            need //= bs
            need -= state[BLOCKS, :n]
            np.maximum(need, 0, out=need)
            if n:
                self._reserved_g = max(self._reserved_g, int(gam.max()))
        total = int(np.add.reduce(need))
        speculating = n > 0 and (gam if isinstance(gam, int) else int(gam[0])) > 0
        cut = False
        # Preempting the newest frees its blocks and, if it decodes, its need.
        while total > pool.free:
            if b.n == 1 and speculating:
                # Only the lookahead does not fit: the oldest request speculates as far
                # as the pool lets it instead of preempting itself forever.
                c0, held = int(state[CTX, 0]), int(state[BLOCKS, 0])
                g0 = gam if isinstance(gam, int) else int(gam[0])
                room = (pool.free + held) * bs - c0 - 1
                g0 = max(0, min(g0, room))
                if isinstance(gam, int):
                    gam = g0
                else:
                    gam[0] = g0
                need[0] = max((c0 + g0 + bs) // bs - held, 0)
                total = int(need[0])
                speculating = g0 > 0
                cut = True
                continue
            self._preempt_last()
            if b.n < n:
                n = b.n
                total -= int(need[n])
            if not b.n:
                return (gam if isinstance(gam, int) else gam[:0]), 0, 0, cut
        pool.allocate(total)
        state[BLOCKS, :n] += need[:n]
        if isinstance(gam, int):
            return gam, n, gam if n else 0, cut
        gam = gam[:n]
        return gam, n, int(gam.max()) if n else 0, cut

    def _preempt_last(self) -> bool:
        """Preempt the newest running request by recompute; False if none runs."""
        b = self.batch
        if not b.n:
            return False
        if b.n <= b.n_decode:  # a decoding request: its context leaves the sum
            self._ctx_sum -= int(b.state[CTX, b.n - 1])
        col = b.pop().tolist()
        rid = col[RID]
        self.pool.release(col[BLOCKS])
        self.yardstick.left(rid)
        led = self.ledger
        led.preemptions[rid] += 1
        generated = self._output[rid] + col[NEG_LEFT]
        led.generated[rid] = generated
        led.drafted[rid] = col[DRAFTED]
        led.accepted[rid] = col[ACCEPTED]
        self.queue.requeue(rid, self._prompt[rid] + generated)
        return True

    def _continue_prefill(self, n: int, budget: int) -> list[int]:
        """V1: the next chunk of each running request still in prefill (after the
        ``n`` decoding ones), in order, while the budget and free blocks last."""
        b, pool, bs, state = self.batch, self.pool, self.block_size, self.batch.state
        slots = self.draft_slots
        chunks: list[int] = []
        for i in range(n, b.n):
            take = min(int(state[TODO, i]), budget - slots)
            if take <= 0:
                break
            held = int(state[BLOCKS, i])
            need = max((int(state[CTX, i]) + take + bs) // bs - held, 0)
            if need > pool.free:
                break
            pool.allocate(need)
            state[BLOCKS, i] = held + need
            chunks.append(take)
            budget -= take + slots
        return chunks

    def _admit(self, budget: int, *, whole: bool = False, extra: int = 0) -> list[int]:
        """Admit waiting requests FCFS; returns the prompt tokens each prefills now.

        A recomputed request prefills its prompt plus what it had generated. V1
        (``whole`` false): the last admitted prompt takes what is left of the budget
        and continues in later steps (chunked prefill). V0 (``whole``): only whole
        prompts, and one larger than the whole budget is still admitted when it is
        the step's first (vLLM V0 raises the budget to the model's length). Each
        admitted request also takes ``extra`` tokens of the budget (draft slots). The
        rule is ``nightjar.core.admission.admit``, shared with the live scheduler's count.
        """
        b, pool, bs = self.batch, self.pool, self.block_size
        seats, free = self.cfg.max_num_seqs - b.n, pool.free
        if seats <= 0 or free <= 0 or extra >= budget:
            return []  # what admit() would find at its first request, without asking
        room = Room(tokens=budget, blocks=free, seats=seats, block_size=bs, slot_tokens=extra)
        queue = self.queue
        chunks = admit(queue.pending_tokens(), room, whole=whole)
        if not chunks:
            return chunks
        led, prompt, output = self.ledger, self._prompt, self._output
        pop, pending, log_alpha = queue.pop, queue.pending, self._log_alpha
        taken = 0
        for chunk in chunks:
            rid = pop()
            tokens = pending[rid]
            blocks = (chunk + bs) // bs  # ceil((chunk + 1) / bs)
            taken += blocks
            # NEG_LEFT = generated - output, generated being what the recompute
            # prefills past the prompt; the ledger holds its drafted/accepted so far.
            b.append_one(
                (rid, 0, tokens - prompt[rid] - output[rid], blocks, 0, tokens,
                 int(led.drafted[rid]), int(led.accepted[rid])),
                log_alpha[rid],
            )
        pool.allocate(taken)
        return chunks


def _largest(decision: Decision) -> int:
    """One K for a step's prompts: a per-request decision's largest (vLLM has one K)."""
    return decision if isinstance(decision, int) else max(decision, default=0)
