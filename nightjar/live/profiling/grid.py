"""What the measured profiler measures: the grid, its rules, and the engines' limits.

Pure Python; the measurement itself is :mod:`nightjar.live.profiling.profiler`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from nightjar.core.defaults import DEFAULT_MAX_NUM_SEQS
from nightjar.core.drafter import DRAFT_MODEL
from nightjar.errors import NightjarInputError
from nightjar.live.profiling.ladder import chains, requests

# Prompt length of the measured prefill steps: a typical prompt, not the longest
# context (a long prompt's attention would make every prefill step look dear).
PREFILL_PROMPT = 512


def doubling(cap: int) -> tuple[int, ...]:
    """1, 2, 4, ... below ``cap``, then ``cap``: the default decode batch sizes."""
    out = [1]
    while out[-1] * 2 < cap:
        out.append(out[-1] * 2)
    return (*out, cap) if cap > 1 else (1,)


@dataclass(frozen=True, slots=True)
class ProfilePlan:
    target: str  # local directories
    draft: str | None  # the drafter's checkpoint; None for mtp, ngram, suffix
    target_name: str  # names stored in the profile
    draft_name: str
    # Batches up to the engine's batch cap (``max_num_seqs``), or the largest batch
    # its KV pool holds at the largest context when that is smaller (``within_pool``;
    # only where ``pool_cap`` is set: explicit sizes are measured as given). A larger
    # batch is priced along the table's last segment. Contexts from short chat turns
    # (32) to 512 (every decode point prefills B prompts of its context first, so 1024
    # would double the profile's time); a context outside is priced at the edge.
    batch_sizes: tuple[int, ...] = doubling(DEFAULT_MAX_NUM_SEQS)
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    pool_cap: bool = True
    gammas: tuple[int, ...] = (0, 1, 2, 3)
    contexts: tuple[int, ...] = (32, 512)
    # The simulator prices prefill steps up to its token budget (8192) and a reload's
    # draft rebuild at 4096 tokens
    # (and a draft catch-up can be a single token), so the defaults run from 1 to 8192.
    # 2048 is `nightjar live`'s token budget, the largest step a live run prefills:
    # the curve is convex (ms per token: 1.8 at 256, 2.2 at 1024, 3.1 at 4096 on this
    # CPU), so a line from 1024 to 4096 overprices a 2048-token step by ~25% (issue 15).
    prefill_lengths: tuple[int, ...] = (1, 16, 64, 256, 1024, 2048, 4096, 8192)
    # Mixed steps (no-draft engine): B requests decode while prompts of n tokens arrive,
    # so one step runs both, as vLLM V1 serves a prompt under load. n stays within
    # `nightjar live`'s token budget (2048) with the B decodes; B leaves room in
    # max_num_seqs for the prompts; 64 because a short prompt costs more per token than
    # a line from (0, 0) to 256 says (issue 15: -18% to -42% on a decode-heavy trace).
    # Empty: not measured.
    mixed_batch_sizes: tuple[int, ...] = (1, 8, 32, 56)
    mixed_tokens: tuple[int, ...] = (64, 256, 1024, 1984)
    # Only the no-draft engine's mixed windows (topping up an existing profile).
    only_mixed: bool = False
    # The wake table (no-draft engine): a prefill of ``wake_tokens`` prompt tokens after
    # each pause, seconds. An engine idle for 0.2-3 s ran its next step 50-180 ms slow
    # on this CPU (experiments/idle_wake.py), which the other tables, measured back to
    # back, never see; live, that step is a request's first token. Empty: not measured.
    wake_pauses: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0)
    wake_tokens: int = 64
    output_tokens: int = 32
    repeats: int = 2
    kv_cache_bytes: int = 1 << 30
    vocab: int = 32000
    seed: int = 0
    prompts: tuple[str, ...] = ()  # texts for acceptance; empty: the timing prompts
    workload: str = "synthetic"
    command: str = ""
    model_max_len: int = 2048  # the models' max_position_embeddings
    # False: the engine core is a separate process, as `nightjar live` runs it (the
    # steps then cost what a live run's do). True: in this process, ~5x faster to
    # start, but its steps measured up to ~40% faster than a live run's on 2 cores.
    in_process: bool = False
    # Steps each gamma holds in the draft engine's decode windows before the next
    # (nightjar.live.profiling.session.decode_cycle): only a step whose verified and
    # proposed K agree is a fixed-gamma step, so h - 1 of every h steps count.
    hold: int = 3
    # Passes over the decode cells that contradict the cost model's shape (a larger
    # gamma or batch cheaper, nightjar.profile.check) before the profile is refused.
    remeasure: int = 2
    # Decode windows at one context share their prompts' prefill where they can
    # (nightjar.live.profiling.ladder); False: one window, one prefill, per batch size.
    ladders: bool = True
    # vLLM's speculative method (nightjar.core.drafter) and its other config keys.
    method: str = DRAFT_MODEL
    spec_options: tuple[tuple[str, Any], ...] = ()

    @property
    def gamma_max(self) -> int:
        return self.gammas[-1]

    @property
    def max_model_len(self) -> int:
        # A ladder's longest request (nightjar.live.profiling.ladder) runs past its
        # context by up to about 1.5 windows of output; a plain window's by half of one.
        decode = max(self.contexts) + 2 * self.output_tokens + self.gamma_max + 2
        return max(decode, min(max(self.prefill_lengths) + 2, self.model_max_len))

    @property
    def token_budget(self) -> int:
        """max_num_batched_tokens: a measured prefill of n tokens must fit one step."""
        return max(max(self.prefill_lengths), 2048)

    def decode_chains(self, context: int) -> list[tuple[int, ...]]:
        """The decode windows at ``context``: their batch sizes, largest first (a
        window of several is a ladder)."""
        if not self.ladders:
            return [(b,) for b in sorted(self.batch_sizes, reverse=True)]
        # A ladder's longest request must fit, with a step's drafts, in max_model_len.
        room = self.max_model_len - self.gamma_max - 2
        return chains(self.batch_sizes, context, self.output_tokens, room)

    def pool_blocks(self, context: int, block: int) -> int:
        """KV blocks of ``block`` tokens that the largest decode window at ``context``
        holds at once: each request's prompt, output and a step's drafts, rounded up
        to whole blocks per request (vLLM's CPU backend uses blocks of 128, so the
        rounding is up to 127 tokens a request: counted in blocks of 16, a window of
        99 at context 512 fit a pool it overflowed by 9%)."""
        need = 0
        for rungs in self.decode_chains(context):
            reqs = requests(rungs, context, self.output_tokens)
            need = max(need, sum(-(-(p + o + self.gamma_max + 1) // block) for p, o in reqs))
        return need

    def within_pool(self, blocks: int, block: int) -> ProfilePlan:
        """This plan with its batch sizes cut to the largest batch that a pool of
        ``blocks`` blocks of ``block`` tokens holds at every context (that batch added
        as the last size), so that no window preempts; itself where every window fits
        or ``pool_cap`` is off."""
        if not self.pool_cap or self._fits(blocks, block):
            return self
        lo, hi = 1, max(self.batch_sizes)  # the largest cap that fits, by bisection
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._capped(mid)._fits(blocks, block):
                lo = mid
            else:
                hi = mid - 1
        return self._capped(lo)

    def _fits(self, blocks: int, block: int) -> bool:
        # An upper bound: every request of a window at its final length at once.
        return all(self.pool_blocks(c, block) <= blocks for c in self.contexts)

    def _capped(self, cap: int) -> ProfilePlan:
        sizes = tuple(sorted({b for b in self.batch_sizes if b < cap} | {cap}))
        return replace(self, batch_sizes=sizes)

    def prefill_prompts(self, n: int) -> list[int]:
        """Prompt lengths that make one prefill step of ``n`` tokens: a long n is split
        over prompts of about the largest context (longer only where the largest batch
        size would not hold them), as a burst of arrivals is; one 2k-token prompt would
        charge every prefill step its long attention."""
        longest = max(min(max(self.contexts), PREFILL_PROMPT), -(-n // max(self.batch_sizes)))
        cap = min(self.max_model_len - 2, longest)
        return [cap] * (n // cap) + ([n % cap] if n % cap else [])

    def check(self) -> None:
        """Grid rules the profile format and the engines impose; one-line errors."""
        if list(self.gammas) != list(range(len(self.gammas))) or self.gamma_max < 1:
            raise NightjarInputError(f"--gammas must be 0,1,..,G with G >= 1, got {self.gammas}")
        for flag, values in (
            ("--batch-sizes", self.batch_sizes),
            ("--contexts", self.contexts),
            ("--prefill-lengths", self.prefill_lengths),
        ):
            if not values or min(values) < 1 or len(set(values)) != len(values):
                raise NightjarInputError(f"{flag} must be distinct integers >= 1, got {values}")
        if self.output_tokens < 4 or self.repeats < 1:
            raise NightjarInputError("--output-tokens must be >= 4 and --repeats >= 1")
        if self.hold < 2 or self.remeasure < 0:
            raise NightjarInputError("the gamma hold must be >= 2 and --remeasure >= 0")
        short = min(self.contexts) - self.output_tokens // 2
        if short < 1:
            raise NightjarInputError(
                f"context {min(self.contexts)} is too short for {self.output_tokens} output "
                "tokens (prompts are context - output/2 long): lower --output-tokens"
            )
        if self.max_model_len > self.model_max_len:
            raise NightjarInputError(
                f"the grid needs {self.max_model_len} tokens per sequence but the model "
                f"supports {self.model_max_len}: lower --contexts"
            )
        for b in self.mixed_batch_sizes:
            for n in self.mixed_tokens:
                if b < 1 or n < 1 or b + len(self.prefill_prompts(n)) > max(self.batch_sizes):
                    raise NightjarInputError(
                        f"a mixed step of {b} decodes and {n} prompt tokens needs more than "
                        f"the largest batch size {max(self.batch_sizes)} sequences: lower "
                        "--mixed-batch-sizes or --mixed-tokens"
                    )
        if self.mixed_tokens and max(self.mixed_tokens) + max(self.mixed_batch_sizes or (0,)) > (
            self.token_budget
        ):
            raise NightjarInputError("--mixed-tokens plus the decodes must fit the token budget")
        pauses = self.wake_pauses
        if not all(0 < x <= 60 for x in pauses) or len(set(pauses)) != len(pauses):
            raise NightjarInputError(
                f"--wake-pauses must be distinct seconds in (0, 60], got {pauses}")
        most = max(len(self.prefill_prompts(n)) for n in self.prefill_lengths)
        if most > max(self.batch_sizes):
            raise NightjarInputError(
                f"a prefill of {max(self.prefill_lengths)} tokens needs {most} prompts of at "
                f"most {self.max_model_len - 2} tokens, more than the largest batch size "
                f"{max(self.batch_sizes)}: lower --prefill-lengths"
            )
