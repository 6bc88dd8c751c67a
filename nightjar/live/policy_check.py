"""Which policies a live engine can run: checked before vLLM starts."""

from __future__ import annotations

from collections.abc import Iterable

from nightjar.errors import NightjarInputError

# Policies whose decisions vLLM cannot carry out, with the reason.
UNSUPPORTED = {
    "tetris": "tetris allocates a different gamma per request, which vLLM cannot run "
    "(one speculative length per step for the whole batch)",
    "oracle": "oracle needs the true latency table and acceptance rates, which only the "
    "simulator knows",
}


def check_policies(specs: Iterable[str], gamma_max: int) -> None:
    """Each spec builds (as the engine will build it), runs on vLLM, and names no
    simulator run variant."""
    import nightjar.live.cycle  # noqa: F401  (registers the diagnostic cycle policy)
    from nightjar.core.policy import PolicyEnv
    from nightjar.policies.registry import make_policy

    for spec in specs:
        name = spec.partition(":")[0]
        if name in UNSUPPORTED:
            raise NightjarInputError(f"policy {spec!r} cannot run on vLLM: {UNSUPPORTED[name]}")
        if "@" in spec:
            # A live engine's memory setting is the engine's (--offload), one per run.
            raise NightjarInputError(f"policy {spec!r}: run variants (@offload=...) are the "
                                     "simulator's; give --offload instead")
        make_policy(spec, PolicyEnv(gamma_max=gamma_max, per_request=False))


def check_drafter_present(draft: str | None, method: str, specs: Iterable[str]) -> None:
    """A drafter that loads a checkpoint needs one for every policy that speculates."""
    from nightjar.core.drafter import drafter_kind
    from nightjar.policies.registry import spec_needs_draft

    if draft is None and drafter_kind(method).needs_model and any(
        spec_needs_draft(s) for s in specs
    ):
        raise NightjarInputError("policies other than nospec need a draft model (--draft)")


def speculating(specs: Iterable[str]) -> bool:
    """Whether any of ``specs`` runs with a drafter (every policy but nospec does)."""
    return any(s != "nospec" for s in specs)
