"""What the user asks of the live benchmark (``nightjar bench live``), as one typed
value whose fields make its flags (:func:`nightjar.live.run_options.option`); the flags
it shares with ``nightjar live`` are made by the same functions."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from nightjar.core.defaults import DEFAULT_GAMMA_MAX, DEFAULT_MAX_NUM_SEQS
from nightjar.core.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.live.bench.limits import (
    BENCH_KV_GB,
    BENCH_MAX_MODEL_LEN,
    BENCH_POLICIES,
    BENCH_REPEATS,
    BENCH_RETRIES,
    MAX_FOREIGN_PCT,
)
from nightjar.live.run_options import (
    draft_option,
    force_option,
    max_requests_option,
    model_option,
    option,
    out_option,
    policies_option,
    quiet_option,
    seed_option,
    slo_tpot_option,
    slo_ttft_option,
)


@dataclass(frozen=True, kw_only=True)
class BenchOptions:
    """``nightjar bench live``'s flags, in the order ``--help`` lists them."""

    model: str = model_option("preset, local directory or cached HF id")
    draft: str | None = draft_option("draft model (default: the preset's)")
    traces: tuple[str, ...] = option(
        "--trace", "bundled trace name or path; repeatable: the traces share the rounds, each "
        "written to OUT/bench-<trace name>/", metavar="TRACE", action="append")
    policies: tuple[str, ...] | None = policies_option(BENCH_POLICIES)
    repeats: int = option("--repeats", "rounds; every policy runs once per round (>= 2)",
                          default=BENCH_REPEATS)
    noise_policy: str | None = option(
        "--noise-policy", "the policy run twice per round for the noise floor (default: the "
        "first --policy; 'none' for no noise floor)", default=None, metavar="SPEC")
    cores: str | None = option(
        "--cores", "cores the engine is pinned to, e.g. 0-1 (default: every core this process "
        "may use); its OpenMP threads are bound to them", default=None)
    max_foreign: float = option(
        "--max-foreign", "run again when others used more than PCT%% of the engine's cores",
        default=MAX_FOREIGN_PCT, metavar="PCT")
    retries: int = option(
        "--retries", "times a disturbed run is run again before it is kept, marked loaded",
        default=BENCH_RETRIES)
    no_warmup: bool = option("--no-warmup", "skip each engine's warm-up run", default=False,
                             action="store_true")
    gamma_max: int | None = option(
        "--gamma-max", f"longest speculation a policy may choose (default {DEFAULT_GAMMA_MAX}, "
        "or the --profile's largest gamma where that is smaller)", default=None)
    draft_kv: str = option("--draft-kv",
                           "at gamma 0, keep the draft's KV in sync or skip the draft",
                           default=DEFAULT_DRAFT_KV, choices=DRAFT_KV_MODES)
    profile: str | None = option(
        "--profile", "step-time prior for nightjar+/dsd (a profile or a step table)",
        default=None)
    time_scale: float = option("--time-scale", "multiply trace times by this", default=1.0)
    max_requests: int | None = max_requests_option()
    max_model_len: int = option("--max-model-len", "vLLM max_model_len",
                                default=BENCH_MAX_MODEL_LEN)
    max_num_seqs: int = option("--max-num-seqs", "vLLM max_num_seqs (batch cap)",
                               default=DEFAULT_MAX_NUM_SEQS)
    kv_cache_gb: float = option("--kv-cache-gb",
                                "KV pool size (GiB); the measured profiler's default",
                                default=BENCH_KV_GB)
    seed: int = seed_option("policies")
    out: Path | None = out_option()
    force: bool = force_option()
    verbose: bool = option("--verbose", "show vLLM's whole log", default=False,
                           action="store_true")
    quiet: bool = quiet_option()
    slo_ttft: float = slo_ttft_option()
    slo_tpot: float = slo_tpot_option()

    def check(self) -> None:
        """The numbers, before anything is loaded (one-line errors)."""
        from nightjar.live.bench.limits import check_bench_numbers

        check_bench_numbers(self.time_scale, self.kv_cache_gb, self.retries, self.max_foreign,
                            self.gamma_max)
