"""A live run checked before vLLM starts: every flag, the models on disk, the drafter,
the policies and the step-time prior, in the order that needs the least first (flag
checks need nothing on disk; the models' checks need no engine). What it gives back
is the engine each policy's run starts and the settings its scheduler reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from nightjar.core.defaults import LIVE_POLICIES
from nightjar.core.draft_kv import DEFAULT_DRAFT_KV
from nightjar.errors import NightjarInputError
from nightjar.live.engine_choice import EngineChoice, EngineSizes
from nightjar.live.run_options import LiveOptions
from nightjar.live.settings import LiveSettings

# (gpu, target, draft or None, method) -> the path of a roofline profile (the command
# line's nightjar.roofline.prior_file.roofline_prior: the live engine does not import
# the roofline).
RooflinePrior = Callable[[str, str, "str | None", str], str]
ROOFLINE_PREFIX = "roofline:"


@dataclass(frozen=True)
class CheckedRun:
    """The engine, the settings every policy's run shares, the policy specs in run
    order, and the trace's rate scale."""

    engine: EngineChoice
    base: LiveSettings
    specs: tuple[str, ...]
    rate_scale: float


def check_numbers(options: LiveOptions) -> float:
    """The engine's sizes and the ballast; returns the rate scale."""
    from nightjar.live.rate_scale import rate_scale_of

    for name in ("max_model_len", "max_num_seqs", "max_num_batched_tokens"):
        value = getattr(options, name)
        if value < 1:
            raise NightjarInputError(f"--{name.replace('_', '-')} must be >= 1, got {value}")
    rate_scale = rate_scale_of(options.rate_scale, options.time_scale)
    check_arrival_flags(options)
    if options.tensor_parallel_size < 1:
        raise NightjarInputError(
            f"--tensor-parallel-size must be >= 1, got {options.tensor_parallel_size}"
        )
    if options.ballast_blocks is not None and options.ballast_blocks < 0:
        raise NightjarInputError(f"--ballast-blocks must be >= 0, got {options.ballast_blocks}")
    return rate_scale


def check_arrival_flags(options: LiveOptions) -> None:
    """``--request-rate`` alone or with ``--burstiness``, each in range (the trace's own
    rate is read when it is loaded, before the engine starts)."""
    import math

    from nightjar.trace.schema import MAX_BURSTINESS, MIN_BURSTINESS

    rate = options.request_rate
    if rate is not None:
        if options.rate_scale is not None or options.time_scale is not None:
            raise NightjarInputError("give --request-rate or --rate-scale, not both")
        if not (math.isfinite(rate) and rate > 0):
            raise NightjarInputError(
                f"--request-rate must be a finite number of requests per second > 0, got {rate:g}")
    b = options.burstiness
    if b is not None and not (math.isfinite(b) and MIN_BURSTINESS <= b <= MAX_BURSTINESS):
        raise NightjarInputError(
            f"--burstiness must be in {MIN_BURSTINESS:g}..{MAX_BURSTINESS:g}, got {b:g}")


def preflight(options: LiveOptions, roofline_prior: RooflinePrior) -> CheckedRun:
    """Check the run ``options`` ask for (one-line NightjarInputErrors, before vLLM
    starts); ``roofline_prior`` builds ``--profile roofline:GPU``'s prior."""
    from nightjar.core.drafter import DRAFTERS
    from nightjar.live import elastic
    from nightjar.live.drafter_setup import method_given, resolve_drafter
    from nightjar.live.drafters import choose_drafter
    from nightjar.live.family_checks import family_refusal
    from nightjar.live.forced_residency import parse_forced_residency
    from nightjar.live.kv_room import check_kv_room
    from nightjar.live.lengths import speculation_lengths
    from nightjar.live.models import resolve_model, vocab_size
    from nightjar.live.policy_check import check_drafter_present, check_policies, speculating
    from nightjar.live.step_prior import checked_prior, within_prior
    from nightjar.live.version import installed_family
    from nightjar.live.vllm_args import checked_engine_args
    from nightjar.policies.registry import expand_specs

    o = options
    rate_scale = check_numbers(o)
    choice = choose_drafter(o.speculative_config, o.spec_method, o.spec_model, o.spec_tokens,
                            o.draft)
    gamma_max, spec_tokens = speculation_lengths(o.gamma_max, choice.spec_tokens)
    # Flag checks before the model checks: they need nothing on disk.
    memory = o.memory()
    forced = bool(o.forced_residency)
    roofline = o.profile is not None and o.profile.startswith(ROOFLINE_PREFIX)
    profile = None if roofline else checked_prior(o.profile)
    reload_cost = elastic.reload_cost(o.reload_cost_s, profile, memory)
    elastic.check_alias(o.alias_draft, memory, forced)
    ballast_given = o.ballast_blocks is not None
    if choice.method in DRAFTERS:
        # Named on the command line: refused without vLLM or a model on disk.
        elastic.check_offload(choice.method, o.offload, memory, forced, o.alias_draft,
                              ballast_given)
    family = installed_family()  # the version gate first
    engine_args = checked_engine_args(list(o.vllm_flags), list(o.server_args), o.serve,
                                      o.kv_cache_gb is not None, o.compile)
    target = resolve_model(o.model, "model")
    method, draft = resolve_drafter(choice, o.model, target,
                                    method_given(o.speculative_config, o.spec_method))
    elastic.check_offload(method, o.offload, memory, forced, o.alias_draft, ballast_given)
    # Synthetic prompt ids come from the target's vocabulary (a drafter's own was
    # checked against it by resolve_drafter).
    vocab = vocab_size(target) or 32000
    if roofline and o.profile is not None:
        # Needs the models' config.json, so it is built once they are resolved.
        gpu = o.profile.partition(":")[2]
        profile = checked_prior(roofline_prior(gpu, target, draft, method))
        reload_cost = elastic.reload_cost(o.reload_cost_s, profile, memory)
    capped = within_prior(o.gamma_max, gamma_max, profile)
    if capped < gamma_max and choice.spec_tokens is None:
        spec_tokens = capped  # nothing asked for a longer draft than the policy may use
    gamma_max = capped
    default = ["nightjar"] if o.serve else list(LIVE_POLICIES)
    specs = expand_specs(list(o.policies or default))
    check_policies(specs, gamma_max)
    sizes = EngineSizes(o.max_model_len, o.max_num_seqs, o.max_num_batched_tokens,
                        o.kv_cache_gb, o.compile, o.verbose, o.tensor_parallel_size)
    engine = EngineChoice(target, method, draft, dict(choice.options), gamma_max, spec_tokens,
                          vocab, engine_args, sizes)
    check_drafter_present(engine.draft, engine.method, specs)
    check_kv_room(o.kv_cache_gb, draft if speculating(specs) else None, memory,
                  o.ballast_blocks, o.tensor_parallel_size)
    by_step, by_ms = parse_forced_residency(o.forced_residency)
    # vLLM 0.34's runner always runs the draft at K = 0, so there sync is the default.
    draft_kv = o.draft_kv or ("sync" if family.runner == "V2" else DEFAULT_DRAFT_KV)
    base = LiveSettings(
        gamma_max=gamma_max, seed=o.seed, draft_kv=draft_kv, memory=memory,
        reload_cost_s=reload_cost, ballast_blocks=o.ballast_blocks, reload=o.reload,
        alias=o.alias_draft, profile=profile, forced_residency=by_step,
        forced_residency_ms=by_ms,
    )
    if method in DRAFTERS:
        # What the installed release cannot run, refused here rather than in the engine.
        why = family_refusal(family, base, DRAFTERS[method])
        if why is not None:
            raise NightjarInputError(why)
    return CheckedRun(engine, base, tuple(specs), rate_scale)
