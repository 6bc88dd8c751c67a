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

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass
from math import inf
from typing import Any

import numpy as np
import simpy

from nightjar.core.admission import Limits, Room, admit, step_batch
from nightjar.core.arrivals import ARRIVAL_WINDOW_S
from nightjar.core.drafter import drafter_kind
from nightjar.core.driver import StepDriver
from nightjar.core.policy import Policy
from nightjar.core.records import StepRecord
from nightjar.core.types import Decision, StepContext, StepOutcome
from nightjar.errors import NightjarInputError
from nightjar.policies.registry import spec_needs_draft
from nightjar.profile.model import Profile
from nightjar.sim.acceptance import sample_accepted
from nightjar.sim.batch import RunningBatch
from nightjar.sim.config import DraftKVMode, SchedulerMode, SimConfig
from nightjar.sim.draft import DRAIN_TIMEOUT_S, DraftMemory
from nightjar.sim.kv import BlockPool
from nightjar.sim.ledger import Ledger
from nightjar.sim.no_draft import NoDraft
from nightjar.sim.price import StepShape, price_step

# An idle engine (requests waiting, none admissible, nothing running) looks again
# after this much simulated time, like a server's scheduler loop polling.
IDLE_POLL_S = 0.01


class SimulationStalled(NightjarInputError):
    """The engine cannot make progress: nothing runs and nothing can be admitted."""


def _blocks_for(tokens: np.ndarray, block_size: int) -> np.ndarray:
    return -(-tokens // block_size)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What the scheduler settled for one step."""

    n_decode: int  # the first n_decode running requests decode; the rest prefill
    gammas: np.ndarray  # per decoding request, after clamps
    g_max: int
    clamped: bool
    prefill_tokens: int
    mean_ctx: float
    chunks: np.ndarray  # prompt tokens prefilled this step by each request from prefill_from
    prefill_from: int  # n_decode, except a V0 prefill-only step (decodes idle: 0 and len)


@dataclass(frozen=True, slots=True)
class _Decoded:
    """Per decoding request: id, accepted drafts, emitted tokens."""

    rid: np.ndarray
    accepted: np.ndarray
    emitted: np.ndarray


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
        # A policy that never speculates is served with no draft loaded, as a real
        # server would be: the whole pool for the target and nothing to offload.
        with_draft = spec_needs_draft(getattr(policy, "name", ""))
        self.pool = BlockPool(profile.memory.kv_blocks(draft_resident=with_draft))
        # vLLM V1 with a draft model reserves one more token of the step's input
        # budget per scheduled request, decoding or prefilling
        # (``SpeculativeConfig.max_num_new_slots_for_drafting``: 1 for draft_model):
        # live mixed steps of B decodes at gamma 3 carry 2048 - B(3 + 2) - (prompts)
        # prompt tokens. The paper's V0 engine has no such term.
        # Other drafters reserve none (nightjar.core.drafter: ``draft_slots``).
        kind = drafter_kind(profile.drafter)
        v1 = config.engine is SchedulerMode.V1
        self.draft_slots = kind.draft_slots if with_draft and v1 else 0
        # A lookup drafter (n-gram, suffix) keeps no KV: nothing goes stale at gamma 0,
        # no catch-up when speculation returns, nothing to keep in sync.
        self._draft_has_kv = kind.has_kv
        self.draft: DraftMemory | NoDraft = (
            DraftMemory(env, self.pool, profile, config) if with_draft
            else NoDraft(lambda: float(env.now))
        )
        # The per-step decide -> memory -> clamp -> observe sequence lives in the driver.
        self.driver = StepDriver(policy, self.draft.controller, profile)
        self.rng = np.random.default_rng([config.seed, 11])
        self.batch = RunningBatch()
        self.waiting: deque[int] = deque()
        # Running sums over the waiting queue for StepContext (kept on every push and
        # pop, so a long queue costs nothing per step): tokens to prefill, preempted.
        self._waiting_tokens = 0
        self._waiting_preempted = 0
        self.next_arrival = 0
        self.steps: list[StepRecord] = []
        self.on_step = on_step
        self.wants_requests = bool(getattr(policy, "uses_request_info", False))
        # Batch sizes and contexts outside the profile's table are priced at its edge
        # (Profile.clamp, shared with the policies and the memory controller) and
        # counted (``context_clamped_steps`` in the run's summary), never extrapolated.
        self.context_clamped_steps = 0
        self._draft_prefilled = False  # the draft ran over this step's prompt chunks
        # Idle longer than this with no transfer under way means no event can ever
        # admit the head of the queue: the longest the memory controller may hold
        # the draft (dwell, hold, drain), plus a second. run() refuses to go on.
        mem = config.memory
        self.stall_limit_s = mem.max_dwell_s + mem.reload_hold_s + DRAIN_TIMEOUT_S + 1.0

    # -- the simpy process -------------------------------------------------------
    def run(self) -> Generator[simpy.Event, Any, None]:
        n = self.ledger.arrival_s.shape[0]
        arrivals = self.ledger.arrival_s
        idle_since: float | None = None
        while self.ledger.finished < n:
            now = self.env.now
            while self.next_arrival < n and arrivals[self.next_arrival] <= now:
                self.waiting.append(self.next_arrival)
                self._waiting_tokens += int(self.ledger.prompt[self.next_arrival])
                self.next_arrival += 1
            if not len(self.batch) and not self.waiting:
                yield self.env.timeout(float(arrivals[self.next_arrival]) - now)
                continue
            running = len(self.batch)
            step_time = self._step(now)
            last = self.steps[-1]
            # A step that preempted its whole batch is followed at once by one that
            # admits or finds the engine idle, so only a step that started idle waits.
            if step_time > 0.0 or running or last.emitted or last.prefill_tokens:
                idle_since = None
                yield self.env.timeout(step_time)
                if self.on_step is not None:
                    self.on_step(self.env.now)
                continue
            # The watchdog: a step that took no time and moved no token. Nothing runs
            # and the head of the queue cannot be admitted (a draft transfer or a
            # drain holds the blocks it needs), so wait for the next event instead
            # of spinning at the same instant.
            idle_since = now if idle_since is None else idle_since
            yield self.env.timeout(self._idle_wait(now, idle_since))

    def _idle_wait(self, now: float, idle_since: float) -> float:
        """Simulated seconds an idle engine waits: to the next arrival or transfer,
        at most one poll (the memory controller's dwell is counted in time)."""
        pending = self.env.peek()  # a draft transfer's completion, if one is under way
        n = self.ledger.arrival_s.shape[0]
        arrival = float(self.ledger.arrival_s[self.next_arrival]) if self.next_arrival < n else inf
        if pending == inf and now - idle_since > self.stall_limit_s:
            head = self.waiting[0] if self.waiting else -1
            tokens = int(self.ledger.prompt[head] + self.ledger.generated[head]) if head >= 0 else 0
            raise SimulationStalled(
                f"simulation stalled at {now:.3f} s: request {head} ({tokens} tokens) waits "
                f"for KV blocks the pool ({self.pool.free} free of {self.pool.total}) cannot "
                f"give it, with nothing running for {now - idle_since:.1f} s"
            )
        return max(0.0, min(pending, arrival, now + IDLE_POLL_S) - now)

    # -- one step -----------------------------------------------------------------
    def _context(self, now: float, n: int, batch: int | None = None) -> StepContext:
        """What the policy sees. ``batch``: the requests the step runs (the batch its
        gamma is priced at, ``n`` when not given); contexts, ids and acceptance are
        those of the ``n`` decoding requests (the ones the gamma applies to)."""
        b = self.batch
        led = self.ledger
        ids = true_acc = est = None
        rid = b.rid[:n]
        if self.wants_requests and n:
            ids = rid.tolist()
            true_acc = led.alpha[rid].tolist()
            est = ((led.accepted[rid] + 1.0) / (led.drafted[rid] + 2.0)).tolist()
        return StepContext(
            now=now,
            batch_size=n if batch is None else batch,
            num_waiting=len(self.waiting),
            kv_free_blocks=self.pool.free,
            kv_total_blocks=self.pool.total - self.pool.reclaim_pending,
            draft_resident=self.draft.resident,
            gamma_max=self.cfg.gamma_max,
            mean_context_len=float(b.ctx[:n].mean()) if n else 0.0,
            max_context_len=float(b.ctx[:n].max()) if n else 0.0,
            num_preempted_waiting=self._waiting_preempted,
            waiting_tokens=self._waiting_tokens,
            kv_block_size=self.block_size,
            arrival_rate_rps=self._arrival_rate(now),
            request_ids=ids,
            acceptance_estimates=est,
            true_acceptance=true_acc,
        )

    def _arrival_rate(self, now: float) -> float:
        """Arrivals in the last window over the window (``nightjar.core.arrivals``)."""
        since = int(np.searchsorted(
            self.ledger.arrival_s[: self.next_arrival], now - ARRIVAL_WINDOW_S, side="right"
        ))
        return (self.next_arrival - since) / ARRIVAL_WINDOW_S

    def _step(self, now: float) -> float:
        plan = self._schedule(now)
        step_s, switch_s = self._latency(plan)
        decoded = self._postprocess(plan, now + step_s)
        self._record(now, plan, step_s, switch_s, decoded)
        return step_s

    def _schedule(self, now: float) -> _Plan:
        """Decide gamma, make room in the KV pool, fill the token budget with prompts."""
        b = self.batch
        if self.cfg.engine is SchedulerMode.V0 and self.waiting:
            plan = self._prefill_only(now)
            if plan is not None:
                return plan
        n = b.decoding()
        ctx = self._context(now, n, self._step_batch(n))
        step = self.driver.plan(ctx)
        before = len(b)
        self.draft.start(step.action, self._preempt_last, self._forget_draft_kv)
        gammas = self._gammas(step.decision, min(n, len(b)))
        if self.ledger.no_spec is not None:
            # Opted-out requests decode without speculation (vLLM: no spec tokens).
            gammas[self.ledger.no_spec[b.rid[: gammas.size]]] = 0
        grown, cut = self._grow_kv(gammas)
        preempted = grown or len(b) < before
        n = min(n, len(b))
        gammas = gammas[:n]
        if self.cfg.engine is SchedulerMode.V0:
            chunks = np.zeros(0, dtype=np.int64)
        else:
            slots = self.draft_slots
            budget = self.cfg.max_num_batched_tokens - int(gammas.sum()) - n * (1 + slots)
            chunks = self._continue_prefill(n, budget)
            # Admission only once every partial prefill got its chunk (vLLM serves
            # the running queue before the waiting one).
            if not preempted and chunks.size == len(b) - n:
                left = budget - int(chunks.sum()) - slots * chunks.size
                chunks = np.concatenate((chunks, self._admit(left, extra=slots)))
        return _Plan(
            n_decode=n, gammas=gammas, g_max=int(gammas.max()) if n else 0,
            clamped=step.clamped or cut,
            prefill_tokens=int(chunks.sum()), mean_ctx=float(b.ctx[:n].mean()) if n else 0.0,
            chunks=chunks, prefill_from=n,
        )

    def _step_batch(self, n: int) -> int:
        """V1: the running requests plus the waiting ones this step will admit
        (``nightjar.core.admission.step_batch``, the live scheduler's count too), as if
        the decodes took no drafts: gamma is not chosen yet. The live engine prices
        K at this batch because its drafter proposes for every request in the step;
        the simulator asks with the same count so that both policies see one batch.
        It can admit one fewer when the chosen drafts take the budget's last tokens.

        A step with no decoding request keeps 0: its gamma would apply to nothing
        here (the simulator verifies a K in the step that chose it; live verifies it
        one step later, so the live scheduler asks on every step), and the policy is
        not asked, which leaves the memory controller free to offload during a stretch
        of prefill-only steps as before."""
        if self.cfg.engine is not SchedulerMode.V1 or not n:
            return n
        b, led = self.batch, self.ledger
        if not self.waiting:  # nothing to admit: every running request (cheap path)
            return len(b)
        running = [1] * n + b.todo[n:].tolist()
        pending = (int(led.prompt[r] + led.generated[r]) for r in self.waiting)
        return step_batch(running, pending, self.pool.free, self._limits())

    def _limits(self) -> Limits:
        cfg = self.cfg
        return Limits(
            max_num_batched_tokens=cfg.max_num_batched_tokens,
            max_num_seqs=cfg.max_num_seqs,
            block_size=self.block_size,
            draft_slots=self.draft_slots,
        )

    def _prefill_only(self, now: float) -> _Plan | None:
        """V0: a step that prefills whole admitted prompts and decodes nothing, or None
        when no waiting prompt fits (the step then decodes)."""
        b = self.batch
        n = len(b)
        chunks = self._admit(self.cfg.max_num_batched_tokens, whole=True)
        if not chunks.size:
            return None
        # The step runs no decode: the policy is not asked, the controller still steps.
        ctx = self._context(now, 0)
        step = self.driver.plan(ctx)
        self.draft.start(step.action, self._preempt_last, self._forget_draft_kv)
        n = min(n, len(b))
        chunks = chunks[: len(b) - n]  # a reload may have preempted admissions
        if not chunks.size:
            return None
        return _Plan(
            n_decode=0, gammas=np.zeros(0, dtype=np.int64), g_max=0, clamped=False,
            prefill_tokens=int(chunks.sum()), mean_ctx=0.0, chunks=chunks, prefill_from=n,
        )

    def _latency(self, plan: _Plan) -> tuple[float, float]:
        """The step's duration and the part of it that was the draft's catch-up."""
        b, n = self.batch, plan.n_decode
        has_kv = self._draft_has_kv
        lag = int(b.lag[:n][plan.gammas > 0].sum()) if plan.g_max > 0 and has_kv else 0
        price = price_step(self.profile, StepShape(
            n_decode=n, g_max=plan.g_max, drafted=int(plan.gammas.sum()),
            mean_ctx=plan.mean_ctx, prefill_tokens=plan.prefill_tokens,
            draft_loaded=self.draft.resident,
            sync=has_kv and self.cfg.draft_kv_mode is DraftKVMode.SYNC, lag_tokens=lag,
        ))
        if price.off_grid:  # priced at a table's edge (Profile.clamp, mixed_off_grid)
            self.context_clamped_steps += 1
        self._draft_prefilled = price.draft_prefilled
        step_s = price.total_s + self.draft.take_step_overhead_s()
        return float(step_s), float(price.switch_s)

    def _postprocess(self, plan: _Plan, end: float) -> _Decoded:
        """Apply the sampled outcome at the step's end."""
        b, led, n, gammas = self.batch, self.ledger, plan.n_decode, plan.gammas
        rid = b.rid[:n]
        acc = sample_accepted(
            self.rng, led.alpha[rid], gammas, self.cfg.acceptance_model, self.cfg.positional_decay
        )
        emitted = np.minimum(acc + 1, led.output[rid] - led.generated[rid])
        led.generated[rid] += emitted
        led.drafted[rid] += gammas
        led.accepted[rid] += acc
        b.ctx[:n] += emitted
        lag = b.lag[:n]
        lag[gammas > 0] = 0
        if not (self.draft.resident and self.cfg.draft_kv_mode is DraftKVMode.SYNC):
            lag[gammas == 0] += emitted[gammas == 0]
        if plan.chunks.size:
            self._prefilled(plan, end)
        done = led.generated[b.rid] >= led.output[b.rid]
        if done.any():
            led.finish_s[b.rid[done]] = end
            led.finished += int(done.sum())
            self.pool.release(int(b.blocks[done].sum()))
            b.keep(~done)
        self.draft.after_step(self._preempt_last)
        return _Decoded(rid, acc, emitted)

    def _prefilled(self, plan: _Plan, end: float) -> None:
        """Advance the prefilling requests; a finished prefill emits the first token."""
        b, led = self.batch, self.ledger
        rows = slice(plan.prefill_from, plan.prefill_from + plan.chunks.size)
        b.ctx[rows] += plan.chunks
        b.todo[rows] -= plan.chunks
        if not self._draft_prefilled:
            b.lag[rows] += plan.chunks
        ready = b.todo[rows] == 0
        new = b.rid[rows][ready]
        first = np.isnan(led.first_token_s[new])
        led.first_token_s[new[first]] = end
        led.generated[new] += 1
        ctx = b.ctx[rows]  # a view into the batch
        ctx[ready] += 1

    def _record(
        self, now: float, plan: _Plan, step_s: float, switch_s: float, decoded: _Decoded
    ) -> None:
        pool, n = self.pool, plan.n_decode
        drafted = int(plan.gammas.sum())
        accepted, out = int(decoded.accepted.sum()), int(decoded.emitted.sum())
        self.steps.append(StepRecord(
            now, step_s, n, len(self.waiting), plan.g_max, plan.prefill_tokens, drafted,
            accepted, out, pool.used, pool.total - pool.reclaim_pending,
            self.draft.state_name, switch_s, plan.clamped, plan.mean_ctx,
        ))
        if not n:
            return
        per_request = self.wants_requests
        self.driver.finish(StepOutcome(
            gamma=plan.g_max, batch_size=n, step_time_s=step_s, drafted=drafted,
            accepted=accepted, emitted=out, switch_cost_s=switch_s, clamped=plan.clamped,
            prefill_tokens=plan.prefill_tokens,
            request_ids=decoded.rid.tolist() if per_request else None,
            per_request_accepted=decoded.accepted.tolist() if per_request else None,
            per_request_drafted=plan.gammas.tolist() if per_request else None,
        ))

    @staticmethod
    def _gammas(decision: Decision, n: int) -> np.ndarray:
        if isinstance(decision, int):
            return np.full(n, decision, dtype=np.int64)
        # The batch may have shrunk since the decision (preemption for a reload);
        # the preempted requests are the tail.
        return np.array(decision[:n], dtype=np.int64)  # a copy: opt-outs edit it

    def _forget_draft_kv(self) -> None:
        """The draft is leaving: its KV cache is gone and must be rebuilt on return."""
        self.batch.lag[:] = self.batch.ctx

    def _grow_kv(self, gammas: np.ndarray) -> tuple[bool, bool]:
        """Reserve blocks for ``ctx + gamma + 1`` tokens of each decoding request;
        preempt the newest (prefilling requests first) if short.

        Returns (preempted, lookahead cut): the cut overrides the policy's gamma, so
        the step is reported ``clamped`` and learning policies skip it.
        """
        b, pool = self.batch, self.pool
        preempted = cut = False
        while len(b):
            n = min(gammas.size, len(b))
            need = _blocks_for(b.ctx[:n] + gammas[:n] + 1, self.block_size) - b.blocks[:n]
            np.maximum(need, 0, out=need)
            total = int(need.sum())
            if total <= pool.free:
                pool.allocate(total)
                b.blocks[:n] += need
                return preempted, cut
            if len(b) == 1 and gammas.size and gammas[0] > 0:
                # Only the lookahead does not fit: the oldest request speculates as far
                # as the pool lets it instead of preempting itself forever.
                room = (pool.free + int(b.blocks[0])) * self.block_size - int(b.ctx[0]) - 1
                gammas[0] = max(0, min(int(gammas[0]), room))
                cut = True
                continue
            self._preempt_last()
            preempted = True
        return preempted, cut

    def _preempt_last(self) -> bool:
        """Preempt the newest running request by recompute; False if none runs."""
        b = self.batch
        if not len(b):
            return False
        rid = int(b.rid[-1])
        self.pool.release(int(b.blocks[-1]))
        self.ledger.preemptions[rid] += 1
        self.waiting.appendleft(rid)
        self._waiting_tokens += int(self.ledger.prompt[rid] + self.ledger.generated[rid])
        self._waiting_preempted += 1
        b.truncate(len(b) - 1)
        return True

    def _continue_prefill(self, n: int, budget: int) -> np.ndarray:
        """V1: the next chunk of each running request still in prefill (after the
        ``n`` decoding ones), in order, while the budget and free blocks last."""
        b, pool, bs = self.batch, self.pool, self.block_size
        chunks: list[int] = []
        for i in range(n, len(b)):
            take = min(int(b.todo[i]), budget - self.draft_slots)
            if take <= 0:
                break
            need = max(int(_blocks_for(b.ctx[i] + take + 1, bs)) - int(b.blocks[i]), 0)
            if need > pool.free:
                break
            pool.allocate(need)
            b.blocks[i] += need
            chunks.append(take)
            budget -= take + self.draft_slots
        return np.asarray(chunks, dtype=np.int64)

    def _admit(self, budget: int, *, whole: bool = False, extra: int = 0) -> np.ndarray:
        """Admit waiting requests FCFS; returns the prompt tokens each prefills now.

        A recomputed request prefills its prompt plus what it had generated. V1
        (``whole`` false): the last admitted prompt takes what is left of the budget
        and continues in later steps (chunked prefill). V0 (``whole``): only whole
        prompts, and one larger than the whole budget is still admitted when it is
        the step's first (vLLM V0 raises the budget to the model's length). Each
        admitted request also takes ``extra`` tokens of the budget (draft slots). The
        rule is ``nightjar.core.admission.admit``, shared with the live scheduler's count.
        """
        led, pool, bs = self.ledger, self.pool, self.block_size
        room = Room(
            tokens=budget, blocks=pool.free, seats=self.cfg.max_num_seqs - len(self.batch),
            block_size=bs, slot_tokens=extra,
        )
        pending = (int(led.prompt[r] + led.generated[r]) for r in self.waiting)
        chunks = admit(pending, room, whole=whole)
        if not chunks:
            return np.zeros(0, dtype=np.int64)
        rids: list[int] = []
        tokens: list[int] = []
        for _ in chunks:
            rid = self.waiting.popleft()
            t = int(led.prompt[rid] + led.generated[rid])
            self._waiting_tokens -= t
            self._waiting_preempted -= int(led.preemptions[rid] > 0)
            rids.append(rid)
            tokens.append(t)
        chunk = np.asarray(chunks, dtype=np.int64)
        blocks = _blocks_for(chunk + 1, bs)
        pool.allocate(int(blocks.sum()))
        zeros = np.zeros(len(rids), dtype=np.int64)
        todo = np.asarray(tokens, dtype=np.int64)
        self.batch.append(np.asarray(rids, dtype=np.int64), zeros, blocks, zeros.copy(), todo)
        return chunk
