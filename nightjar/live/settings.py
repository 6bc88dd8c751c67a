"""What the Nightjar scheduler and worker need to know, carried inside vLLM's config.

vLLM builds the scheduler and the workers itself, often in other processes, so the
only channel from the caller is ``VllmConfig.additional_config``: a JSON-able dict.
:class:`LiveSettings` round-trips through it under the ``"nightjar"`` key.
This module imports neither vllm nor torch.
"""

from __future__ import annotations

import dataclasses
import json
import os
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nightjar import checks
from nightjar.core.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.core.memory import MemoryConfig
from nightjar.errors import NightjarInputError

KEY = "nightjar"
# The drop-in path (``vllm serve ... --scheduler-cls nightjar... --worker-cls ...``):
# Nightjar's settings as JSON, or the path of a JSON file, in this variable, when
# ``--additional-config`` has no "nightjar" key. The engine's processes inherit it.
CONFIG_ENV = "NIGHTJAR_CONFIG"
# What a drop-in engine runs when its settings name no policy (``--serve``'s default).
DROP_IN_POLICY = "nightjar"



@dataclass(frozen=True, slots=True)
class LiveSettings:
    """Per-engine Nightjar settings.

    Invariants: ``0 <= gamma_max <= `` the engine's ``num_speculative_tokens``
    (checked by the scheduler), because vLLM sizes its draft buffers for that and
    can only run shorter lengths.
    """

    policy: str = "nospec"
    gamma_max: int = 3
    seed: int = 0
    # JSON-lines file the scheduler appends step/request/event records to (the
    # engine core may run in another process, so records travel through a file).
    step_log: str | None = None
    # At gamma 0: "sync" runs the draft over the new tokens anyway (vLLM's own
    # behaviour: its KV stays current); "skip" does not run it at all (its KV goes
    # stale for those tokens, which costs acceptance later, never correctness).
    draft_kv: str = DEFAULT_DRAFT_KV
    # Draft residency: the memory controller's thresholds; ``None`` keeps the draft
    # resident for the whole run.
    memory: MemoryConfig | None = None
    # Service seconds a reload costs, for the controller's early reload on forgone
    # speculation gain (priced with ``profile``); ``None`` turns that reload off.
    reload_cost_s: float | None = None
    # KV blocks the draft's bytes stand for; ``None`` = derive from the draft's
    # weight files and the engine's bytes per block.
    ballast_blocks: int | None = None
    # How a reload empties the ballast region: "drain" waits for the requests in it
    # to free their blocks; "migrate" copies their blocks out of it at once.
    reload: str = "drain"
    # Place the draft's weights inside the ballast region of the KV cache, so the
    # resident draft and the withheld blocks are the same bytes
    # (nightjar.live.residency.alias). On CPU the draft's linears then run through
    # plain F.linear (measured slower; docs/kernels.md), so it is off by default.
    alias: bool = False
    # Step-time prior for latency-planning policies (nightjar+, dsd): a bundled
    # profile name, a profile JSON path or a step-table JSON (nightjar.live.profiling.latency).
    profile: str | None = None
    # Snapshot file of Nightjar's state (nightjar.live.state), rewritten a few
    # times a second; ``--serve`` exports it as Prometheus metrics.
    state_file: str | None = None
    # Where the scheduler writes a one-line start-up failure before its process
    # exits with code 2 (nightjar.live.startup); the caller reports it.
    error_file: str | None = None
    # Test hook: forced residency actions at given step indices ({step: "offload" |
    # "reload"}), bypassing the controller, to exercise offload/reload cycles.
    forced_residency: dict[int, str] = field(default_factory=dict)
    # The same keyed by milliseconds since the engine's first scheduled step (one
    # action per step, the earliest due first): cycles that land in the same phase
    # of a load test however many steps a loaded machine needs.
    forced_residency_ms: dict[int, str] = field(default_factory=dict)
    # Honour the run switch a request may carry (nightjar.live.run_switch): one engine
    # start serves several runs (the live benchmark, the profiler). Never with
    # ``--serve``: there the request's extra arguments come from clients.
    switch_runs: bool = False

    def __post_init__(self) -> None:
        if self.gamma_max < 0:
            raise NightjarInputError(f"gamma_max must be >= 0, got {self.gamma_max}")
        if self.ballast_blocks is not None and self.ballast_blocks < 0:
            raise NightjarInputError(f"ballast blocks must be >= 0, got {self.ballast_blocks}")
        if self.reload_cost_s is not None and not self.reload_cost_s >= 0.0:
            raise NightjarInputError(f"reload cost must be >= 0 s, got {self.reload_cost_s}")
        if self.draft_kv not in DRAFT_KV_MODES:
            raise NightjarInputError(f"draft KV mode must be sync or skip, got {self.draft_kv!r}")
        if self.reload not in ("drain", "migrate"):
            raise NightjarInputError(f"reload mode must be drain or migrate, got {self.reload!r}")
        if self.switch_runs and self.memory is not None:
            # A run's residency state (ballast, parked weights) would leak into the next.
            raise NightjarInputError("runs sharing one engine need the draft resident "
                                     "(no memory controller)")
        if self.policy.partition(":")[0].partition("@")[0] not in _policy_names():
            raise NightjarInputError(f"nightjar settings: unknown policy {self.policy!r}")
        for step, action in {**self.forced_residency, **self.forced_residency_ms}.items():
            if action not in ("offload", "reload"):
                raise NightjarInputError(f"forced residency at step {step}: bad {action!r}")

    def to_additional_config(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)  # also turns ``memory`` into a plain dict
        # JSON object keys are strings; from_config turns them back into ints.
        data["forced_residency"] = {str(k): v for k, v in self.forced_residency.items()}
        data["forced_residency_ms"] = {str(k): v for k, v in self.forced_residency_ms.items()}
        return {KEY: data}

    @classmethod
    def for_engine(cls, additional_config: dict[str, Any] | None, spec_tokens: int) -> LiveSettings:
        """The settings a plugged-in engine runs with: ``additional_config["nightjar"]``
        (what ``nightjar live`` sends), else :data:`CONFIG_ENV` (the drop-in path), else
        the defaults. Where the drop-in settings leave them out, the policy is
        :data:`DROP_IN_POLICY` and ``gamma_max`` the engine's speculative length."""
        if KEY in (additional_config or {}):
            return cls.from_config(additional_config)
        data = _env_settings()
        data.setdefault("policy", DROP_IN_POLICY)
        data.setdefault("gamma_max", spec_tokens)
        if data.get("alias") is True and "memory" not in data:
            # Elastic memory's default (``nightjar live --offload auto``): on where the
            # freed bytes become KV blocks for real, the draft aliased into its ballast.
            data["memory"] = {}
        return cls.from_config({KEY: data})

    @classmethod
    def from_config(cls, additional_config: dict[str, Any] | None) -> LiveSettings:
        """The settings under ``additional_config["nightjar"]``, each value checked
        against its field's type: a user writes these by hand (the drop-in path), and
        ``"no"`` must not read as true nor ``2.5`` as a length."""
        raw = (additional_config or {}).get(KEY)
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise NightjarInputError("nightjar settings must be a JSON object")
        data = _typed(cls, raw, "nightjar settings")
        memory = data.pop("memory", None)
        if memory is not None:
            memory = MemoryConfig(**_typed(MemoryConfig, _object(memory, "memory"),
                                           "nightjar settings: memory"))
        return cls(**data, memory=memory)


def _policy_names() -> set[str]:
    import nightjar.live.cycle  # noqa: F401  (registers the live-only cycle policies)
    from nightjar.policies.registry import registered

    return set(registered())


def _object(value: Any, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise NightjarInputError(f"nightjar settings: {name} must be a JSON object")
    return value


def _typed(cls: type, data: dict[str, Any], where: str) -> dict[str, Any]:
    """``data``'s keys checked against ``cls``'s fields and each value against its type
    (bool, int, float, str, optional ones, ``{step: action}`` maps, nested objects
    passed through for their own check)."""
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key not in known:
            raise NightjarInputError(f"{where}: unknown key {key!r}")
        kind, name = hints[key], f"{where}: {key}"
        optional = type(None) in typing.get_args(kind)
        if optional:
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        if value is None and optional:
            out[key] = None
        elif kind is bool:
            out[key] = checks.boolean(value, name)
        elif kind is int:
            out[key] = checks.integer(value, name)
        elif kind is float:
            out[key] = checks.number(value, name)
        elif kind is str:
            out[key] = checks.text(value, name)
        elif typing.get_origin(kind) is dict:  # forced residency: {step: action}
            out[key] = {checks.integer(_int_key(k, name), f"{name} step"):
                        checks.text(v, f"{name} action") for k, v in _object(value, key).items()}
        else:
            out[key] = value
    return out


def _int_key(key: Any, name: str) -> Any:
    """JSON object keys are strings: ``"12"`` is step 12."""
    if isinstance(key, str):
        try:
            return int(key)
        except ValueError:
            raise NightjarInputError(f"{name}: step {key!r} is not an integer") from None
    return key


def _env_settings() -> dict[str, Any]:
    """Nightjar's settings from :data:`CONFIG_ENV` (JSON text or a JSON file), or {}."""
    text = os.environ.get(CONFIG_ENV, "").strip()
    if not text:
        return {}
    # JSON text (an object, or anything else JSON, refused below) or a file's path.
    if not text.startswith(("{", "[", '"')) and not _is_json(text):
        try:
            text = Path(text).read_text(encoding="utf-8")
        except OSError as exc:
            raise NightjarInputError(
                f"{CONFIG_ENV}={text}: cannot read ({exc.strerror or exc})"
            ) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise NightjarInputError(f"{CONFIG_ENV}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise NightjarInputError(f"{CONFIG_ENV}: must hold a JSON object of Nightjar settings")
    return data


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return False
    return True
