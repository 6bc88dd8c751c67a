"""Per-request opt-out of speculation (the trace's ``speculate: false``, or
``"vllm_xargs": {"nightjar_no_spec": 1}`` in an OpenAI request). Imports no vLLM."""

from __future__ import annotations

from typing import Any

# The request field that keeps one request from being speculated: vLLM's OpenAI server
# passes ``vllm_xargs`` through to ``SamplingParams.extra_args`` (values may be
# strings or numbers, not booleans), so ``"vllm_xargs": {"nightjar_no_spec": 1}``.
NO_SPEC_KEY = "nightjar_no_spec"


def opted_out(request: Any) -> bool:
    # Every supported release has both fields (a pooling request has no params).
    params = request.sampling_params
    extra = params.extra_args if params is not None else None
    if not extra:
        return False
    value = extra.get(NO_SPEC_KEY)
    return value not in (None, 0, "0", "false", "False", False)


def withhold_opted_out(running: Any) -> None:
    """Drop the draft's proposals for opted-out requests before vLLM schedules them.

    vLLM V1 schedules a running request's ``spec_token_ids`` per request (a request
    without any is scheduled one token, as without speculation), and sets them anew
    from the drafter's output after every step (``update_draft_token_ids``). Emptying
    them here means the target verifies nothing for that request: its output is
    vLLM's plain decode, while the rest of the batch speculates. The drafter still
    proposes for it (the draft runs batched, one K for all), so the opt-out saves the
    verify work, not the draft's.
    """
    for request in running:
        if request.spec_token_ids and opted_out(request):
            request.spec_token_ids = []
