"""The kinds of drafter a speculative engine runs, and what each one implies.

vLLM 0.32's ``speculative_config.method`` names the drafter: a separate draft model,
an EAGLE or EAGLE-3 head fed the target's hidden states, the target's own MTP
layers, or a lookup over the tokens seen so far (n-gram; suffix trees with
``arctic-inference``). Gamma per step means the same thing for all of them; what
differs, and what the simulator, the memory controller and the policies need to
know, is here:

- ``own_weights``: the drafter has weights of its own that can leave device memory
  (Nightjar's offload). MTP layers belong to the target's checkpoint and share its
  embedding and head; n-gram and suffix have no weights at all.
- ``has_kv``: it keeps a KV cache of its own. Steps it skips (gamma 0 with
  ``--draft-kv skip``) leave that cache stale, and the next speculative step pays a
  catch-up over the missed tokens (C_switch). A lookup drafter has no such cost.
- ``needs_model``: ``speculative_config.model`` must name a checkpoint.
- ``draft_slots``: budget tokens vLLM V1 reserves per scheduled request for drafting
  (``SpeculativeConfig.max_num_new_slots_for_drafting``: 1 for a draft model, 0 for
  the others, non-parallel).

Imports nothing of ours but errors.
"""

from __future__ import annotations

from dataclasses import dataclass

from nightjar.errors import NightjarInputError

DRAFT_MODEL = "draft_model"


@dataclass(frozen=True, slots=True)
class DrafterKind:
    name: str
    own_weights: bool
    has_kv: bool
    needs_model: bool
    draft_slots: int
    summary: str


DRAFTERS: dict[str, DrafterKind] = {
    k.name: k
    for k in (
        DrafterKind(DRAFT_MODEL, True, True, True, 1, "a separate small model"),
        DrafterKind("eagle", True, True, True, 0,
                    "an EAGLE head: one decoder layer fed the target's last hidden state"),
        DrafterKind("eagle3", True, True, True, 0,
                    "an EAGLE-3 head: one decoder layer fed three of the target's hidden "
                    "states, with its own LM head"),
        DrafterKind("mtp", False, True, False, 0,
                    "the target's own multi-token-prediction layers"),
        DrafterKind("ngram", False, False, False, 0,
                    "prompt lookup: the tokens after the latest match of the last n tokens"),
        DrafterKind("suffix", False, False, False, 0,
                    "suffix-tree lookup over the prompt and earlier outputs (arctic-inference)"),
    )
}


def drafter_kind(name: str, where: str = "drafter") -> DrafterKind:
    """The kind called ``name``, or a one-line NightjarInputError naming the choices."""
    kind = DRAFTERS.get(name)
    if kind is None:
        raise NightjarInputError(
            f"{where} {name!r}: choose from {', '.join(DRAFTERS)}"
        )
    return kind


def offload_enabled(mode: str, drafter: str) -> bool:
    """Whether elastic draft memory runs for ``mode`` (``auto``/``on``/``off``) with
    this drafter: ``auto`` wherever the drafter has weights to move. ``on`` with a
    drafter that has none is the caller's to refuse (:func:`offload_refusal`)."""
    if mode == "auto":
        return offload_refusal(drafter) is None
    return mode == "on"


def offload_refusal(name: str) -> str | None:
    """Why Nightjar cannot move this drafter out of device memory, or None if it can."""
    kind = drafter_kind(name)
    if kind.own_weights:
        return None
    if name == "mtp":
        return ("the mtp drafter is the target's own layers (shared embedding and head): "
                "there are no separate weights to offload")
    return f"the {name} drafter has no weights: there is nothing to offload"
