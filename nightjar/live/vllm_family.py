"""The version seam: every vLLM internal Nightjar reads that differs between releases.

Nightjar patches private scheduler and worker internals, so it supports the releases
it has been checked against, grouped in families that share those internals:

- ``v1-runner`` (0.32, 0.33): the V1 model runner, chosen with
  ``VLLM_USE_V2_MODEL_RUNNER=0``; its drafter (``runner.drafter``) is what Nightjar's
  worker wraps for draft offload, aliasing and skipping the draft at K = 0.
  ``ModelRunnerOutput.req_id_to_index`` maps a request to its sampled tokens.
- ``v2-runner`` (0.34): the V1 runner and proposers are deleted; the V2 runner reads
  the scheduler's per-step K (``num_spec_tokens_to_schedule``) and truncates drafts
  to it for every method, and its autoregressive speculators (draft model, EAGLE,
  MTP, DFlash) draft only K tokens. A request's sampled tokens sit at its position
  in ``ModelRunnerOutput.req_ids``. Nightjar's worker does not run here yet.

Outside this module nothing reads a vLLM field with a ``getattr`` default: a field a
release lacks is an error naming it, never a silent zero (a zero acceptance teaches
the bandit that speculation never pays). This module imports no vLLM at import time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nightjar.errors import NightjarInputError

# vLLM's V1 runner keeps a per-batch-size K table only for these methods (0.33's
# ``_maybe_disable_dynamic_sd_for_v1``; 0.32 reads the table in the scheduler for
# every method but only these proposers shorten their drafts).
_V1_TABLE_METHODS = frozenset({"ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash"})


class VllmMismatch(RuntimeError):
    """vLLM's objects lack a field this release family is known to have."""


@dataclass(frozen=True, slots=True)
class Family:
    """What differs between the vLLM releases Nightjar runs on."""

    name: str
    releases: tuple[str, ...]
    runner: str  # "V1" or "V2": the model runner Nightjar's plugins drive
    # The engine environment Nightjar needs (set before vLLM is imported).
    engine_env: tuple[tuple[str, str], ...]
    # Whether Nightjar's worker (draft offload, aliasing, skipping the draft at K = 0)
    # runs on this family.
    worker: bool
    # Methods whose per-batch-size K table (``num_speculative_tokens_per_batch_size``)
    # the release honours; None: every method (drafts are truncated centrally).
    table_methods: frozenset[str] | None

    def honours_table(self, method: str) -> bool:
        return self.table_methods is None or method in self.table_methods

    def sampled_by_request(self, output: Any) -> Mapping[str, Sequence[int]]:
        """Each request's sampled tokens in one step's ``ModelRunnerOutput``.

        A request with drafts but no entry here was not read: the caller counts it
        apart from one whose drafts were all rejected.
        """
        try:
            sampled = output.sampled_token_ids
            if self.runner == "V1":
                index: Mapping[str, int] = output.req_id_to_index
            else:
                index = {req_id: i for i, req_id in enumerate(output.req_ids)}
        except AttributeError as err:
            raise VllmMismatch(
                f"nightjar: vLLM's ModelRunnerOutput has no {err.name!r} "
                f"(expected on vLLM {', '.join(self.releases)})"
            ) from None
        return {req: sampled[i] for req, i in index.items() if i < len(sampled)}

    def uses_v2_runner(self, vllm_config: Any) -> bool:
        """Whether this engine runs the V2 model runner (the CPU worker runs V1 on
        the V1 family whatever the setting says)."""
        if self.runner == "V2":
            return True
        from vllm.platforms import current_platform

        return bool(vllm_config.use_v2_model_runner) and not current_platform.is_cpu()

    def draft_slots(self, speculative_config: Any) -> int:
        """KV slots vLLM reserves per request for the drafts it proposes next."""
        if speculative_config is None:
            return 0
        return int(speculative_config.max_num_new_slots_for_drafting)


def declared_arms(gamma_max: int, max_num_seqs: int) -> list[list[int]]:
    """A ``num_speculative_tokens_per_batch_size`` table naming every K in 0..gamma_max.

    On the V2 runner (0.34) a K the table never names gets no FULL CUDA graph, and each
    named K gets graphs up to the largest batch the table maps to it. Nightjar sets K
    itself every step, so the table only declares the arms: the batch range is split
    into ``gamma_max + 1`` runs on a log scale, the largest K on the smallest batches
    (where speculation pays); K = 0 covers the largest, up to ``max_num_seqs``. With
    fewer batch sizes than arms, the middle arms go unnamed.
    """
    arms = min(gamma_max + 1, max_num_seqs)  # a range holds one batch size at least
    edges = sorted({round(max_num_seqs ** (i / arms)) for i in range(arms)})
    if len(edges) < arms:  # too few batch sizes for a log scale: one each from 1
        edges = list(range(1, arms + 1))
    table = []
    for i, start in enumerate(edges):
        end = edges[i + 1] - 1 if i + 1 < len(edges) else max_num_seqs
        table.append([start, end, max(gamma_max - i, 0)])
    table[-1][2] = 0
    return table


FAMILIES = (
    Family(
        name="v1-runner",
        releases=("0.32.0", "0.33.0"),
        runner="V1",
        engine_env=(("VLLM_USE_V2_MODEL_RUNNER", "0"),),
        worker=True,
        table_methods=_V1_TABLE_METHODS,
    ),
    Family(
        name="v2-runner",
        releases=("0.34.0",),
        runner="V2",
        engine_env=(),
        worker=False,
        table_methods=None,
    ),
)
SUPPORTED_VLLM = tuple(r for f in FAMILIES for r in f.releases)


def family_of(version: str) -> Family:
    """The family of a vLLM version string (``0.32.0+cpu`` counts as 0.32.0), or a
    one-line NightjarInputError naming the version and the supported ones."""
    base = version.split("+", 1)[0]
    for family in FAMILIES:
        if base in family.releases:
            return family
    raise NightjarInputError(
        f"Nightjar supports vLLM {', '.join(SUPPORTED_VLLM)} only, found {version} "
        "(it relies on private scheduler and worker internals)"
    )


def running_family() -> Family:
    """The family of the vLLM this process imported (what the plugins actually run on,
    whatever the installed metadata says)."""
    import vllm

    return family_of(str(vllm.__version__))
