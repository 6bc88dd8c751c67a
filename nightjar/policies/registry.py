"""The registry that turns a spec such as ``"fixed:3"`` into a policy.

A policy is registered by decorating a factory in a module of ``nightjar.policies``;
every module there is imported on first lookup, so adding a policy is one new file.
"""

from __future__ import annotations

import difflib
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from nightjar.core.policy import Policy, PolicyEnv, PolicyFactory
from nightjar.core.variant import split_variant
from nightjar.errors import NightjarInputError


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    name: str
    factory: PolicyFactory
    summary: str
    # Spec strings that ``--policy all`` runs for this policy (e.g. fixed:1..4).
    default_specs: tuple[str, ...]
    # ``draftless(arg)``: true when the policy built with that argument can never
    # speculate, so an engine serves it with no draft loaded (full KV capacity).
    draftless: Callable[[str | None], bool] | None = None


_REGISTRY: dict[str, PolicyInfo] = {}
_loaded = False


def register(
    name: str,
    summary: str,
    default_specs: tuple[str, ...] | None = None,
    draftless: Callable[[str | None], bool] | None = None,
) -> Callable[[PolicyFactory], PolicyFactory]:
    """Register ``factory(arg, env)`` under ``name``; ``arg`` is the text after ':'.

    ``draftless(arg)`` declares the specs that never speculate (see
    :func:`spec_needs_draft`).
    """

    def wrap(factory: PolicyFactory) -> PolicyFactory:
        if name in _REGISTRY:
            raise RuntimeError(f"policy {name!r} registered twice")
        specs = default_specs if default_specs is not None else (name,)
        _REGISTRY[name] = PolicyInfo(name, factory, summary, specs, draftless)
        return factory

    return wrap


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    import nightjar.policies as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        importlib.import_module(f"{pkg.__name__}.{mod.name}")
    _loaded = True


def registered() -> dict[str, PolicyInfo]:
    _load_all()
    return dict(_REGISTRY)


def make_policy(spec: str, env: PolicyEnv) -> Policy:
    """Build a policy from a spec such as ``nospec``, ``fixed:3`` or ``schedule:1-16:3``."""
    _load_all()
    # A run variant (``@offload=off``) is the engine's to apply, not the policy's.
    base, _ = split_variant(spec.strip())
    name, sep, arg = base.partition(":")
    info = _REGISTRY.get(name)
    if info is None:
        known = ", ".join(sorted(_REGISTRY))
        near = difflib.get_close_matches(name, list(_REGISTRY), n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        raise NightjarInputError(f"unknown policy {spec!r} ({hint}known: {known})")
    # ``name:`` passes an empty argument, never "no argument": ``schedule:`` is a typo,
    # not a request for the default table.
    policy = info.factory(arg if sep else None, env)
    policy.name = spec.strip()
    return policy


def spec_needs_draft(spec: str) -> bool:
    """Whether an engine must load the draft model to serve this policy spec.

    A policy that can never speculate (``nospec``) declares it at registration; a
    server running it loads no draft, so its KV cache has the draft's memory too.
    Unknown specs (e.g. test doubles) are assumed to speculate.
    """
    _load_all()
    name, _, arg = spec.strip().partition(":")
    info = _REGISTRY.get(name)
    if info is None or info.draftless is None:
        return True
    return not info.draftless(arg or None)


# ``all`` lists the static baselines first and the yardstick last.
_ALL_ORDER = {"nospec": 0, "fixed": 1, "schedule": 2, "oracle": 9}
# Policies whose spec fixes the gammas they run.
_STATIC = frozenset({"fixed", "schedule"})


def expand_specs(specs: list[str], gamma_max: int | None = None) -> list[str]:
    """Expand ``all`` into every registered policy's default specs, keeping order.

    With ``gamma_max``, ``all`` leaves out the static specs that ask for more (e.g.
    ``fixed:4`` under gamma_max 3): run, they would be mislabelled, and a spec the
    user wrote out is refused instead (see :func:`within_gamma_max`).
    """
    _load_all()
    infos = sorted(_REGISTRY.values(), key=lambda i: (_ALL_ORDER.get(i.name, 5), i.name))
    out: list[str] = []
    for spec in specs:
        if spec == "all":
            chosen = [s for info in infos for s in info.default_specs]
            chosen = [s for s in chosen if gamma_max is None or within_gamma_max(s, gamma_max)]
        else:
            chosen = [spec]
        out.extend(s for s in chosen if s not in out)
    return out


def within_gamma_max(spec: str, gamma_max: int) -> bool:
    """Whether a static spec (``fixed:G``, ``schedule:...``) stays within ``gamma_max``;
    True for every other policy, which chooses within any gamma_max it is given."""
    if split_variant(spec)[0].partition(":")[0] not in _STATIC:
        return True
    try:
        make_policy(spec, PolicyEnv(gamma_max=gamma_max))
    except NightjarInputError:
        return False
    return True
