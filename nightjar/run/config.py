"""One simulator run's settings, and the only place their defaults live.

``nightjar sim``, ``nightjar.simulate``, a sweep cell and ``nightjar validate`` all
build a :class:`RunConfig` and get the simulator's :class:`~nightjar.sim.SimConfig`
from it; each field's metadata says how the command line spells it. A setting added
here reaches every entry point: ``tests/test_run_config.py`` fails until the CLI, the
API and the sweep grid expose it with this default.

The live engine reads the same defaults where it has the same setting (gamma_max,
max_num_seqs, max_num_batched_tokens); its own (fewer policies: each costs minutes;
a max_model_len vLLM can size for) are here too, so that ``nightjar validate``
describes a live run with the settings ``nightjar live`` used.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nightjar.checks import boolean, integer, number
from nightjar.core.defaults import (
    DEFAULT_GAMMA_MAX,
    DEFAULT_MAX_MODEL_LEN,
    DEFAULT_MAX_NUM_BATCHED_TOKENS,
    DEFAULT_MAX_NUM_SEQS,
    DEFAULT_OFFLOAD,
    OFFLOAD_MODES,
    gamma_max_within,
)
from nightjar.core.defaults import LIVE_POLICIES as LIVE_POLICIES  # a live run's default
from nightjar.core.draft_kv import DEFAULT_DRAFT_KV, DRAFT_KV_MODES
from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError
from nightjar.trace.schema import MAX_BURSTINESS, MAX_SEED, MIN_BURSTINESS

if TYPE_CHECKING:
    from nightjar.profile.profile import Profile
    from nightjar.sim.knobs import SimConfig

# What `nightjar sim`, `nightjar.simulate` and `nightjar sweep` compare by default: no
# speculation, every fixed length, the paper's bandit in both forms, and ours.
DEFAULT_POLICIES = (
    "nospec", "fixed:1", "fixed:2", "fixed:3", "fixed:4", "nightjar", "nightjar-code", "nightjar+",
)
# `nightjar live` and `nightjar validate` (describing a live run) use the shared values
# (nightjar.core.defaults).
LIVE_GAMMA_MAX = DEFAULT_GAMMA_MAX
LIVE_MAX_NUM_SEQS = DEFAULT_MAX_NUM_SEQS
LIVE_MAX_NUM_BATCHED_TOKENS = DEFAULT_MAX_NUM_BATCHED_TOKENS
LIVE_MAX_MODEL_LEN = DEFAULT_MAX_MODEL_LEN

CHOICES: dict[str, tuple[str, ...]] = {
    "draft_kv": DRAFT_KV_MODES,
    "offload": OFFLOAD_MODES,
    "acceptance": ("geometric", "positional"),
    "reload": ("drain", "migrate"),
    "engine": ("v1", "v0"),
    "on_unfit": ("refuse", "skip"),
}


# What a field is to a sweep (nightjar.sweep.spec): an axis of the grid, one value for
# the whole sweep, or nothing (a cell runs one policy, so it has no oracle to add).
# seed, rate_scale and policies are axes the grid names and orders itself.
AXIS, SCALAR, OWN_AXIS, NOT_SWEPT = "axis", "scalar", "own axis", "not swept"


def _flag(flag: str, help_text: str, sweep: str = AXIS) -> dict[str, str]:
    return {"flag": flag, "help": help_text, "sweep": sweep}


@dataclass(frozen=True)
class RunConfig:
    """What one simulator run is asked to do, besides its trace and profile."""

    policies: tuple[str, ...] = field(default=DEFAULT_POLICIES, metadata=_flag(
        "--policy", "policy spec, repeatable (nospec, fixed:3, schedule:1-16:3,17-:0, nightjar,"
        " all)", OWN_AXIS))
    seed: int = field(default=0, metadata=_flag(
        "--seed", "seed of acceptance draws and policies", OWN_AXIS))
    rate_scale: float = field(default=1.0, metadata=_flag(
        "--rate-scale", "multiply the trace's request rate by S: every arrival time divided by"
        " S (2 = the same requests twice as fast)", OWN_AXIS))
    burstiness: float | None = field(default=None, metadata=_flag(
        "--burstiness", "draw the arrivals as vLLM's bench does: gamma-distributed gaps of"
        " shape B at the trace's mean rate (after --rate-scale), seeded by --seed; 1 ="
        " Poisson, below 1 burstier (default: the trace's own arrival times)"))
    offload: str = field(default=DEFAULT_OFFLOAD, metadata=_flag(
        "--offload", "elastic draft memory: move the draft to host memory when its KV blocks"
        " are worth more to waiting requests than speculation buys; auto = wherever the"
        " drafter has weights to move (a draft model, EAGLE heads), off = never"))
    reload: str = field(default="drain", metadata=_flag(
        "--reload", "how a reload takes back its KV blocks"))
    draft_kv: str = field(default=DEFAULT_DRAFT_KV, metadata=_flag(
        "--draft-kv", "at gamma 0, keep the draft's KV in sync (vLLM's behaviour) or skip the"
        " draft and rebuild its KV later"))
    acceptance: str = field(default="geometric", metadata=_flag(
        "--acceptance", "accepted-drafts model (docs/simulator.md)"))
    gamma_max: int = field(default=DEFAULT_GAMMA_MAX, metadata=_flag(
        "--gamma-max", "longest speculation a policy may choose"))
    max_num_seqs: int = field(default=DEFAULT_MAX_NUM_SEQS, metadata=_flag(
        "--max-num-seqs", "running requests at most (a batch past the profile's largest is"
        " priced along its last segment)"))
    max_num_batched_tokens: int = field(default=DEFAULT_MAX_NUM_BATCHED_TOKENS, metadata=_flag(
        "--max-num-batched-tokens", "tokens one step may schedule, decodes and prompt chunks"
        " together"))
    engine: str = field(default="v1", metadata=_flag(
        "--engine", "scheduling: v1 = vLLM V1 chunked prefill mixed with decodes under the"
        " token budget (decodes first); v0 = prefill-only steps, as the paper's engine"
        " (docs/simulator.md)"))
    prior: str = field(default="exact", metadata=_flag(
        "--prior", "latency table the policies plan with: exact (the simulated profile), none,"
        " scale:F, spec-scale:F, batch-scale:S,L or a profile; the oracle always uses the"
        " exact one"))
    max_model_len: int | None = field(default=None, metadata=_flag(
        "--max-model-len", "the most tokens (prompt + output) a request may hold, as vLLM's"
        " max_model_len (default: no limit beyond the KV cache)"))
    on_unfit: str = field(default="refuse", metadata=_flag(
        "--on-unfit", "a request that can never fit the KV cache: refuse the run (default) or"
        " skip it and count it as rejected", SCALAR))
    oracle: bool = field(default=True, metadata=_flag(
        "--no-oracle", "skip the per-step oracle run (a reference the report draws; regret is"
        " against the alternatives and the bound)", NOT_SWEPT))
    alternatives: bool = field(default=False, metadata=_flag(
        "--alternatives", "also run every static alternative the full-system regret compares"
        " with: nospec, fixed:1..gamma_max, and where the drafter has weights each fixed"
        " length with elastic memory the other way (SPEC@offload=on|off)", NOT_SWEPT))
    slo_ttft: float = field(default=Slo().ttft_s, metadata=_flag(
        "--slo-ttft", "time-to-first-token limit for goodput, seconds", SCALAR))
    slo_tpot: float = field(default=Slo().tpot_s, metadata=_flag(
        "--slo-tpot", "time-per-output-token limit for goodput, seconds", SCALAR))

    @classmethod
    def build(cls, values: Mapping[str, Any], spell: Callable[[str], str] = str) -> RunConfig:
        """A checked config from ``values`` (field name -> value; absent keys keep their
        default). ``spell`` names a field in messages (``--gamma-max`` on the command
        line, ``gamma_max`` in the API); every bad value is a NightjarInputError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names, key=str)
        if unknown:
            raise NightjarInputError(f"unknown setting {unknown[0]!r}")
        config = cls(**{k: _normalise(v) if k != "offload" else offload_mode(v)
                        for k, v in values.items()})
        config.check(spell)
        return config

    def check(self, spell: Callable[[str], str] = str) -> None:
        """Every field on its own; :meth:`check_profile` adds what needs the profile."""
        if isinstance(self.policies, str) or not isinstance(self.policies, tuple | list) or not (
            self.policies and all(isinstance(p, str) and p.strip() for p in self.policies)
        ):
            raise NightjarInputError(
                f"{spell('policies')} must be policy specs (got {_short(self.policies)})")
        boolean(self.oracle, spell("oracle"))
        boolean(self.alternatives, spell("alternatives"))
        for name, choices in CHOICES.items():
            value = getattr(self, name)
            if not isinstance(value, str) or value not in choices:
                raise NightjarInputError(
                    f"{spell(name)} {_short(value)}: choose from {', '.join(choices)}")
        for name in ("seed", "gamma_max", "max_num_seqs", "max_num_batched_tokens",
                     "max_model_len"):
            value = getattr(self, name)
            if value is None and name == "max_model_len":
                continue
            integer(value, spell(name))
        for name in ("slo_ttft", "slo_tpot"):
            number(getattr(self, name), spell(name), positive=True)
        number(self.rate_scale, spell("rate_scale"), positive=True)
        # Past these a gamma's draws are all one value or all near zero: no arrival
        # process, only floating-point noise.
        if self.burstiness is not None and not (
                MIN_BURSTINESS <= number(self.burstiness, spell("burstiness"), positive=True)
                <= MAX_BURSTINESS):
            raise NightjarInputError(f"{spell('burstiness')} must be in {MIN_BURSTINESS:g}.."
                                     f"{MAX_BURSTINESS:g}, got {self.burstiness:g}")
        if not 0 <= self.seed <= MAX_SEED:
            raise NightjarInputError(f"{spell('seed')} must be in 0..{MAX_SEED}, got {self.seed}")
        if self.gamma_max < 1:
            raise NightjarInputError(f"{spell('gamma_max')} must be >= 1, got {self.gamma_max}")
        if self.max_num_batched_tokens < 1 or self.max_num_seqs < 1:
            raise NightjarInputError(f"{spell('max_num_batched_tokens')} and "
                                     f"{spell('max_num_seqs')} must be >= 1")
        if self.max_num_batched_tokens < self.gamma_max + 2:
            # One decode at gamma_max takes gamma_max + 1 tokens of the step, and vLLM V1
            # reserves one more per request while a draft is loaded: a smaller budget
            # could never schedule a request, and the run would wait forever.
            raise NightjarInputError(
                f"{spell('max_num_batched_tokens')} {self.max_num_batched_tokens} is less than"
                f" {self.gamma_max + 2}: a step must hold one request's decode at "
                f"{spell('gamma_max')} {self.gamma_max} (gamma + 1 tokens) and its draft slot")
        if self.max_model_len is not None and self.max_model_len < 1:
            raise NightjarInputError(
                f"{spell('max_model_len')} must be >= 1, got {self.max_model_len}")
        if self.reload == "migrate" and self.offload == "off":
            raise NightjarInputError(f"{spell('reload')} migrate needs {spell('offload')} on"
                                     " or auto (no draft reload without it)")
        if not isinstance(self.prior, str) or not self.prior.strip():
            raise NightjarInputError(
                f"{spell('prior')} must be a prior spec (exact, none, scale:F, spec-scale:F or"
                f" a profile), got {_short(self.prior)}")
        self.slo()  # raises on a bad limit

    def check_profile(self, profile: Profile, spell: Callable[[str], str] = str) -> None:
        """What the settings ask of the profile: gammas its table holds, a prior it can
        give."""
        from nightjar.profile.priors import parse_prior

        if self.gamma_max > profile.gamma_max:
            raise NightjarInputError(
                f"{spell('gamma_max')} {self.gamma_max} exceeds the profile's table"
                f" (gamma <= {profile.gamma_max})"
            )
        if self.offload == "on":
            from nightjar.core.drafter import offload_refusal

            why = offload_refusal(profile.drafter)
            if why is not None:
                raise NightjarInputError(f"{spell('offload')} on: {why} (profile {profile.name})")
        parse_prior(self.prior, profile)

    def specs(self, drafter: str) -> list[str]:
        """The policy specs to run with the profile's ``drafter``: ``all`` expanded, the
        missing alternatives with ``alternatives``, and the oracle last when asked for.

        The default set leaves out the fixed lengths above ``gamma_max`` (``fixed:4``
        under gamma_max 3); a spec the user wrote out is refused instead.
        """
        from nightjar.core.drafter import offload_refusal
        from nightjar.policies.registry import expand_specs, registered, within_gamma_max
        from nightjar.results.alternatives import expected_alternatives, missing_alternatives

        if tuple(self.policies) == DEFAULT_POLICIES:
            specs = [s for s in DEFAULT_POLICIES if within_gamma_max(s, self.gamma_max)]
        else:
            specs = expand_specs(list(self.policies), self.gamma_max)
        if self.alternatives:
            movable = offload_refusal(drafter) is None
            specs += missing_alternatives(specs, expected_alternatives(
                self.gamma_max, self.offload_on(drafter), movable))
        if self.oracle and "oracle" in registered() and "oracle" not in specs:
            specs.append("oracle")
        return specs

    def slo(self) -> Slo:
        try:
            return Slo(ttft_s=float(self.slo_ttft), tpot_s=float(self.slo_tpot))
        except (ValueError, TypeError) as exc:
            raise NightjarInputError(
                f"slo_ttft/slo_tpot: {exc} (got {self.slo_ttft}, {self.slo_tpot})"
            ) from None

    def offload_on(self, drafter: str) -> bool:
        """Whether elastic draft memory runs with this drafter (``auto`` resolved)."""
        from nightjar.core.drafter import offload_enabled

        return offload_enabled(self.offload, drafter)

    def sim_config(self, drafter: str) -> SimConfig:
        """The simulator's knobs for this run with the profile's ``drafter`` (which
        resolves ``offload`` auto): each knob reads the setting of its name
        (:func:`nightjar.sim.knobs.knobs_of`), so a setting the engine needs is one field
        here and one of the same name there."""
        from nightjar.sim.knobs import knobs_of

        return knobs_of(self.values(), offload=self.offload_on(drafter))

    def values(self) -> dict[str, Any]:
        """Field name -> value, shallow (what :meth:`build` takes back)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def within(self, profile: Profile, gamma_given: bool) -> RunConfig:
        """This config with a ``gamma_max`` the user did not give lowered to the longest
        the profile's table prices (a profile measured with ``nightjar profile``'s
        default gammas 0..3 under the default 4); one given past the table stays, for
        :meth:`check_profile` to refuse."""
        # A table of gamma 0 alone leaves the default for check_profile to refuse (a
        # simulated run needs gamma_max >= 1).
        top = profile.gamma_max if profile.gamma_max >= 1 else None
        gamma_max = gamma_max_within(self.gamma_max, gamma_given, top)
        return self if gamma_max == self.gamma_max else dataclasses.replace(
            self, gamma_max=gamma_max)

    @staticmethod
    def fields_swept(role: str) -> list[str]:
        """The fields a sweep treats as ``role`` (:data:`AXIS`, :data:`SCALAR`, ...), in
        field order: the grid's nesting order and the sweep table's column order."""
        return [f.name for f in dataclasses.fields(RunConfig) if f.metadata["sweep"] == role]


def offload_mode(value: Any) -> Any:
    """A boolean offload (the API's and older sweeps' spelling) as its mode; any other
    value as given, for :meth:`RunConfig.check` to judge."""
    value = _normalise(value)
    if isinstance(value, bool):
        return "on" if value else "off"
    return value


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _normalise(value: Any) -> Any:
    """numpy scalars as the Python values they stand for (``np.int64(3)`` is a seed,
    ``np.bool_(True)`` a switch); everything else as given, for :meth:`RunConfig.check`."""
    if type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return value.item()
    return value


def flag_of(name: str) -> str:
    """How the command line spells a field (``gamma_max`` -> ``--gamma-max``)."""
    meta = {f.name: f.metadata for f in dataclasses.fields(RunConfig)}[name]
    return str(meta["flag"])
