"""Per-step gamma inside vLLM V1: a ``scheduler_cls`` that is a step-driver adapter.

Each ``schedule()`` builds a :class:`StepContext` from the scheduler's own state
(running and waiting queues, free KV blocks) and asks the step driver
(:class:`nightjar.core.driver.StepDriver`: policy, memory controller, clamp) for the
step's plan; the gamma goes through vLLM's dynamic-speculation hook
(``dynamic_sd_lookup``), which becomes ``SchedulerOutput.num_spec_tokens_to_schedule``:
the number of tokens the drafter proposes at the end of this step. They are verified
in the next step, so a gamma chosen at step t shows up as drafted/accepted at t+1
(one-step lag). The plan's memory action is carried out by
:class:`nightjar.live.residency.coordinator.Residency`, which returns the one typed
message (:mod:`nightjar.live.wire`) the worker reads from the step's
``SchedulerOutput``. ``update_from_output`` then measures drafted vs accepted per
request and the step's wall time, reports the outcome to the driver, and writes the
step to the step log.

What differs between vLLM releases (the runner, the output fields) is read through
:mod:`nightjar.live.vllm_family`, which the constructor checks first: on vLLM 0.32
and 0.33 the V1 model runner (the V2 runner there ignores a per-step K for draft
models), on 0.34 the V2 runner, where the draft's memory is not yet Nightjar's.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from vllm.v1.core.sched.async_scheduler import AsyncScheduler
from vllm.v1.core.sched.scheduler import Scheduler

import nightjar.live.cycle  # noqa: F401  (registers the cycle policy)
from nightjar.core.admission import Limits, step_batch
from nightjar.core.arrivals import ArrivalRate
from nightjar.core.draft_kv import SyncedDraftLatency
from nightjar.core.drafter import DRAFT_MODEL, drafter_kind, offload_refusal
from nightjar.core.driver import StepDriver
from nightjar.core.memory import Action
from nightjar.core.policy import PolicyEnv
from nightjar.core.types import StepContext
from nightjar.live.family_checks import refuse_on_family
from nightjar.live.optout import withhold_opted_out
from nightjar.live.plugins.stepstats import StepStats, emitted_tokens
from nightjar.live.profiling.latency import Clamped, load_latency
from nightjar.live.residency.coordinator import (
    Residency,
    ballast_blocks,
    memory_controller,
)
from nightjar.live.run_switch import RunStart, run_start_of
from nightjar.live.settings import LiveSettings
from nightjar.live.startup import reports_startup_errors
from nightjar.live.state import StateWriter
from nightjar.live.steplog import StepLog
from nightjar.live.vllm_family import running_family
from nightjar.live.wire import attach, message_of
from nightjar.policies.registry import make_policy


def engine_facts(vllm_config: Any) -> dict[str, Any]:
    """The engine's settings as vLLM resolved them, for the step log's start event:
    what a run (and a test) reads back to see which flags reached the engine."""
    spec = vllm_config.speculative_config
    cache, sched = vllm_config.cache_config, vllm_config.scheduler_config
    return {
        "method": str(spec.method) if spec is not None else None,
        "num_speculative_tokens": int(spec.num_speculative_tokens) if spec is not None else 0,
        "spec_model": str(spec.model) if spec is not None and spec.model else None,
        "gpu_memory_utilization": float(cache.gpu_memory_utilization),
        "kv_cache_memory_bytes": cache.kv_cache_memory_bytes,
        "block_size": int(cache.block_size),
        "max_num_batched_tokens": int(sched.max_num_batched_tokens),
        "max_num_seqs": int(sched.max_num_seqs),
        "max_model_len": int(vllm_config.model_config.max_model_len),
        "tensor_parallel_size": int(vllm_config.parallel_config.tensor_parallel_size),
        "enable_prefix_caching": bool(cache.enable_prefix_caching),
    }


class NightjarSchedulerMixin:
    """The Nightjar hooks; combined with vLLM's sync or async scheduler below."""

    _nj_opt_out = False  # whether the per-request opt-out (NO_SPEC_KEY) is honoured

    @reports_startup_errors  # type: ignore[untyped-decorator, unused-ignore]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before vLLM builds anything: on a release Nightjar does not know, every
        # internal below may mean something else.
        self.nj_family = running_family()
        super().__init__(*args, **kwargs)
        sched: Any = self
        self.nj = LiveSettings.for_engine(
            sched.vllm_config.additional_config, int(sched.num_spec_tokens)
        )
        spec = sched.vllm_config.speculative_config
        self.nj_method = str(spec.method) if spec is not None else DRAFT_MODEL
        # One line, before anything starts, for a method Nightjar does not know.
        kind = drafter_kind(self.nj_method, "speculative method")
        nj = self.nj
        moves = nj.memory is not None or nj.forced_residency or nj.forced_residency_ms
        if moves and not kind.own_weights:
            raise ValueError(f"nightjar: offload asked for, but {offload_refusal(kind.name)}")
        refuse_on_family(self.nj_family, self.nj, kind, sched.vllm_config)
        if self.nj.gamma_max > sched.num_spec_tokens:
            # vLLM sizes its draft buffers for num_speculative_tokens; it can run
            # shorter lengths per step, never longer ones.
            raise ValueError(
                f"nightjar: gamma_max {self.nj.gamma_max} exceeds the engine's "
                f"num_speculative_tokens ({sched.num_spec_tokens})"
            )
        self.nj_log = StepLog(self.nj.step_log)
        self.nj_pool_blocks = sched.kv_cache_manager.block_pool.get_num_free_blocks()
        controller = memory_controller(self.nj, self._draft_blocks())
        self._nj_begin_run(controller)
        self.nj_residency = Residency(self.nj, controller, sched.kv_cache_manager, self.nj_log)
        if self.nj.alias and not self.nj_residency.enabled:
            raise ValueError(
                "nightjar: aliasing the draft needs the ballast withheld (--offload on): "
                "without it the KV pool would hand out the blocks holding its weights"
            )
        self.nj_state = StateWriter(self.nj.state_file, self.nj.policy, self.nj.gamma_max)
        held = self.nj_residency.ballast.held  # the pool as operators first see it
        self.nj_state.kv(self.nj_pool_blocks - held, self.nj_pool_blocks - held, held, True)
        self._nj_lookup_len = sched.scheduler_config.max_num_seqs + 1
        self._nj_log_start()

    def _nj_begin_run(self, controller: Any) -> None:
        """A fresh policy, step driver and step counters for ``self.nj`` (at start-up,
        and at every run switch, :mod:`nightjar.live.run_switch`)."""
        latency, alpha = load_latency(self.nj.profile) if self.nj.profile else (None, None)
        # Counts the policy's and driver's lookups priced at the profile's edge.
        self.nj_clamped = latency if isinstance(latency, Clamped) else None
        if isinstance(latency, Clamped) and self.nj.draft_kv == "sync":
            # vLLM runs the draft on every K = 0 step; the profile's gamma-0 row does not.
            latency = SyncedDraftLatency(latency)
        policy = make_policy(
            self.nj.policy,
            PolicyEnv(
                gamma_max=self.nj.gamma_max,
                seed=self.nj.seed,
                latency=latency,
                acceptance_prior=alpha,
                per_request=False,
                drafter=self.nj_method,
            ),
        )
        # vLLM runs one K for the whole batch: batch_gamma turns a per-request
        # decision into its max.
        self.nj_driver = StepDriver(policy, controller, latency, batch_gamma=True)
        self.nj_stats = StepStats()
        # Request arrival times (monotonic, when vLLM hands the request to the
        # scheduler) for ``StepContext.arrival_rate_rps``.
        self.nj_arrivals = ArrivalRate()

    def _nj_log_start(self) -> None:
        sched: Any = self
        self.nj_log.write(
            "event",
            event="start",
            mono=time.monotonic(),
            pool_blocks=self.nj_pool_blocks,
            ballast=self.nj_residency.ballast.target,
            policy=self.nj.policy,
            engine=engine_facts(sched.vllm_config),
        )

    def _nj_log_summary(self) -> None:
        grid = self.nj_clamped.summary() if self.nj_clamped is not None else {}
        self.nj_log.write(
            "summary", **self.nj_driver.controller.summary(time.monotonic()), **grid
        )

    def _nj_switch(self, run: RunStart) -> None:
        """End the current run and start ``run`` (the engine is idle, or it refuses)."""
        sched: Any = self
        if sched.running or sched.waiting:
            # Splitting a run would mix two policies' steps in both logs.
            self.nj_log.write("event", event="switch_refused", mono=time.monotonic(),
                              policy=run.policy, running=len(sched.running),
                              waiting=len(sched.waiting))
            return
        self._nj_log_summary()
        self.nj = dataclasses.replace(
            self.nj, policy=run.policy, step_log=run.step_log, seed=run.seed
        )
        self.nj_log.reopen(run.step_log)
        self._nj_begin_run(self.nj_driver.controller)
        self._nj_log_start()

    def _draft_blocks(self) -> int:
        sched: Any = self
        return int(ballast_blocks(self.nj, sched.vllm_config, sched.kv_cache_config))

    def _step_batch(self) -> int:
        """The running requests plus the waiting ones vLLM's admission takes in this
        step (``nightjar.core.admission.step_batch``, the simulator's rule too).

        An estimate of vLLM's own loop: each running request first takes what it
        computes this step (a decode 1 + the drafts it verifies, a partial prefill its
        next chunk) and its draft slot; then waiting requests FCFS while the token
        budget, the free KV blocks and ``max_num_seqs`` allow, the last one possibly
        a partial chunk (chunked prefill).
        """
        sched: Any = self
        spec = sched.vllm_config.speculative_config
        limits = Limits(
            max_num_batched_tokens=min(
                int(sched.max_num_scheduled_tokens),
                int(sched.scheduler_config.max_num_batched_tokens),
            ),
            max_num_seqs=self._nj_lookup_len - 1,
            block_size=int(sched.block_size),
            draft_slots=self.nj_family.draft_slots(spec),
        )
        running = (
            int(r.num_tokens_with_spec)
            + int(r.num_output_placeholders)
            - int(r.num_computed_tokens)
            for r in sched.running
        )
        pending = (int(r.num_tokens) - int(r.num_computed_tokens) for r in sched.waiting)
        free = sched.kv_cache_manager.block_pool.get_num_free_blocks()
        return step_batch(running, pending, free, limits)

    def add_request(self, request: Any) -> None:
        run = run_start_of(request) if self.nj.switch_runs else None
        if run is not None:
            self._nj_switch(run)
        self.nj_arrivals.record(time.monotonic())
        super().add_request(request)  # type: ignore[misc]

    def schedule(self, *args: Any, **kwargs: Any) -> Any:
        sched: Any = self
        now = time.monotonic()
        pool = sched.kv_cache_manager.block_pool
        running, waiting = len(sched.running), len(sched.waiting)
        # The K chosen now is drafted at the end of this step for every request in
        # it, the ones admitted now included (and the draft runs over their prompt
        # chunks), so the batch it prices is the running requests plus what
        # admission takes in this step. Counting the running ones alone priced
        # the step that admitted 20 prompts at B = 1 (issue 15).
        batch = max(self._step_batch(), min(running + waiting, 1))
        held = self.nj_residency.ballast.held
        # Tokens already in the running requests' KV (the profile's context axis).
        computed = [r.num_computed_tokens for r in sched.running]
        context = sum(computed) / running if running else 0.0
        # Prompt tokens the running requests still have to prefill (chunked prompts).
        prefill_left = sum(
            max(0, r.num_prompt_tokens - r.num_computed_tokens) for r in sched.running)
        # The waiting queue's KV demand and how much of it preemption caused: one pass
        # over the queue, which stays short on a server that keeps up.
        waiting_tokens = preempted = 0
        for r in sched.waiting:
            waiting_tokens += r.num_tokens
            preempted += r.num_preemptions > 0
        driver = self.nj_driver
        ctx = StepContext(
            now=now,
            batch_size=batch,
            num_waiting=waiting,
            kv_free_blocks=pool.get_num_free_blocks(),
            kv_total_blocks=self.nj_pool_blocks - held,
            draft_resident=driver.draft_resident,
            gamma_max=self.nj.gamma_max,
            mean_context_len=context,
            max_context_len=float(max(computed, default=0)),
            num_preempted_waiting=preempted,
            waiting_tokens=waiting_tokens,
            kv_block_size=int(sched.block_size),
            arrival_rate_rps=self.nj_arrivals.rate(now),
            max_num_seqs=self._nj_lookup_len - 1,
            prefill_tokens_left=prefill_left,
            request_ids=[self.nj_stats.stable_id(r.request_id) for r in sched.running],
        )
        if self._nj_opt_out:
            withhold_opted_out(sched.running)
        plan = driver.plan(ctx, self.nj_residency.next_step())
        if self.nj_clamped is not None:
            self.nj_clamped.end_step()
        message = self.nj_residency.carry_out(plan.action, now)
        gamma = plan.gamma
        sched.dynamic_sd_lookup = [gamma] * self._nj_lookup_len
        out = super().schedule(*args, **kwargs)  # type: ignore[misc]
        attach(out, message)
        self.nj_stats.begin(
            out,
            ctx,
            chosen=plan.chosen_gamma,
            gamma=gamma,
            clamped=plan.clamped,
            state=self.nj_residency.state.value,
        )
        return out

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        sched: Any = self
        outcome = self.nj_stats.end(
            scheduler_output,
            self.nj_family.sampled_by_request(model_runner_output),
            sched.num_sampled_tokens_per_step,
        )
        if outcome is not None:
            # Before vLLM frees this step's finished requests, whose blocks it used.
            outcome[0].kv_used_blocks = (
                self.nj_pool_blocks
                - self.nj_residency.ballast.held
                - sched.kv_cache_manager.block_pool.get_num_free_blocks()
            )
        message = message_of(scheduler_output)
        if message.residency is not Action.NONE:
            done = self.nj_residency.after_step()
            if done is not None:
                self.nj_state.residency_done(done, len(message.migration))
        result = super().update_from_output(  # type: ignore[misc]
            scheduler_output, model_runner_output
        )
        if outcome is not None:
            record, step_outcome, start, chosen = outcome
            # What vLLM emitted, after it cut each request at its budget or stop: a
            # verify step that accepts past a request's last token samples more.
            record.emitted = emitted_tokens(result)
            stats = self.nj_stats
            self.nj_log.step(
                record,
                start_mono=start,
                chosen_gamma=chosen,
                priced_batch=stats.last_priced_batch,
                scheduled=stats.last_scheduled,
                unread=stats.last_unread,
            )
            self.nj_state.step(record, chosen, self.nj_residency.ballast.held)
            if step_outcome is not None:
                step_outcome.emitted = record.emitted
                self.nj_driver.finish(step_outcome)
        if not sched.running and not sched.waiting:
            # Going idle: the engine may not schedule again for a long time, so the
            # rate-limited snapshot must hold the last step now.
            self.nj_state.flush()
            # A run may end here: its caller reads the step log while the engine is
            # still up (a shared engine's next run, or the replay before shutdown), so
            # the summary so far is written at every idle point; the reader keeps the
            # last one.
            self._nj_log_summary()
        return result

    def _free_request(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        drafted, accepted = self.nj_stats.pop_request(request.request_id)
        self.nj_log.write(
            "request",
            request_id=request.request_id,
            drafted=drafted,
            accepted=accepted,
            preemptions=request.num_preemptions,
        )
        result = super()._free_request(request, *args, **kwargs)  # type: ignore[misc]
        # Finished or aborted (a client gone): the snapshot must show the blocks back.
        sched: Any = self
        held = self.nj_residency.ballast.held
        self.nj_state.kv(
            self.nj_pool_blocks - held,
            sched.kv_cache_manager.block_pool.get_num_free_blocks(),
            held,
            flush=not sched.running and not sched.waiting,
        )
        return result

    def shutdown(self) -> None:
        self._nj_log_summary()
        self.nj_log.close()
        self.nj_state.flush()
        super().shutdown()  # type: ignore[misc]


class NightjarScheduler(NightjarSchedulerMixin, Scheduler):  # type: ignore[misc, unused-ignore]
    """For engines without async scheduling (vLLM on CPU always disables it)."""

    _nj_opt_out = True


class NightjarAsyncScheduler(NightjarSchedulerMixin, AsyncScheduler):  # type: ignore[misc, unused-ignore]
    """For engines with async scheduling (vLLM's default on CUDA)."""

    # The async scheduler books the drafts as output placeholders a step ahead
    # (``update_draft_token_ids_in_output``); emptying them there is untested, so the
    # per-request opt-out is off (docs/live.md).
    _nj_opt_out = False
