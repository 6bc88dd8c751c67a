"""The front door: settings, a trace and a profile made into a run ready to simulate.

``nightjar sim``, ``nightjar.simulate``, ``nightjar schedule``, ``nightjar validate``
(both forms) and a sweep cell all come through here, so a run is prepared one way:

1. the trace at the settings' rate scale;
2. ``gamma_max`` within the profile's table when the user did not give it
   (:meth:`RunConfig.within`), then everything the settings ask of the profile
   (:meth:`RunConfig.check_profile`);
3. the simulator's knobs (:meth:`RunConfig.sim_config`, ``offload`` auto resolved for
   the profile's drafter) and the policy specs (:meth:`RunConfig.specs`);
4. every policy built once and every request checked against the KV pool, so that a
   bad input fails before the first simulated step.

Invariant: a :class:`PreparedRun` has passed every check; running it raises only on
what a run alone can find (a stalled engine).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nightjar.run.config import RunConfig

if TYPE_CHECKING:  # the simulator (simpy) is imported only when a run is prepared
    from nightjar.core.records import RunResult
    from nightjar.profile.profile import Profile
    from nightjar.results.run_set import ResultSet
    from nightjar.sim.knobs import SimConfig
    from nightjar.sim.servable import Fit, OnUnfit
    from nightjar.trace.trace import Trace


@dataclass(frozen=True)
class Settled:
    """Settings held against a profile: ``gamma_max`` settled, the knobs derived."""

    config: RunConfig
    profile: Profile
    knobs: SimConfig

    @property
    def movable(self) -> bool:
        """Whether the profile's drafter has weights elastic memory could move."""
        from nightjar.core.drafter import offload_refusal

        return offload_refusal(self.profile.drafter) is None


def settle(config: RunConfig, profile: Profile, *, gamma_given: bool = True,
           spell: Callable[[str], str] = str, checked: bool = False) -> Settled:
    """``config`` checked against ``profile`` (steps 2 and 3 of the module's list but the
    specs): what a caller with its own requests and policies (``validate`` replays a
    live run's) needs. ``checked``: the caller has checked them already."""
    config = config.within(profile, gamma_given)
    if not checked:
        config.check_profile(profile, spell)
    return Settled(config, profile, config.sim_config(profile.drafter))


@dataclass(frozen=True)
class PreparedRun(Settled):
    """A run every input of which is loaded and checked; nothing simulated yet."""

    trace: Trace  # at the settings' rate scale
    specs: tuple[str, ...]
    fit: Fit | None  # None: the caller checked (a sweep checks its grid up front)

    @property
    def on_unfit(self) -> OnUnfit:
        from nightjar.sim.servable import OnUnfit

        return OnUnfit(self.config.on_unfit)

    def simulate(self, progress: Callable[[str, float], None] | None = None, *,
                 trace: Trace | None = None, seed: int | None = None,
                 specs: Sequence[str] | None = None,
                 command: str | None = None) -> list[RunResult]:
        """Every spec (or ``specs``) over the trace, on the same arrivals and acceptance
        draws; ``trace`` and ``seed`` replace the prepared ones (``nightjar sim --seeds``
        re-draws both per seed; the caller gives ``trace`` at the settings' rate
        scale). Each result carries the run's provenance
        (:mod:`nightjar.results.provenance`), ``command`` as its command line (default:
        this process's)."""
        from nightjar.results.provenance import of_run
        from nightjar.sim import simulate_many

        knobs = self.knobs if seed is None else dataclasses.replace(self.knobs, seed=seed)
        ran = trace or self.trace
        results = simulate_many(ran, self.profile,
                                list(self.specs if specs is None else specs), knobs,
                                progress=progress, on_unfit=self.on_unfit,
                                prior=self.config.prior)
        record = of_run(self.config, knobs.offload, ran, self.profile)
        if command is not None:
            record["command"] = command
        for result in results:
            result.provenance = dict(record)
        return results

    def result_set(self, runs: Sequence[RunResult], title: str) -> ResultSet:
        """The runs summarised with the yardsticks these settings call for."""
        from nightjar.results.run_set import ResultSet

        return ResultSet.build(list(runs), title=title, slo=self.config.slo(),
                               gamma_max=self.config.gamma_max, offload=self.knobs.offload,
                               movable=self.movable)


def arrivals(trace: Trace, config: RunConfig, seed: int) -> Trace:
    """``trace``'s requests at the times ``config`` asks: its own arrivals scaled by
    ``rate_scale``, or with ``burstiness`` gaps drawn as vLLM's bench draws them."""
    scaled = trace.rate_scaled(config.rate_scale)
    if config.burstiness is None:
        return scaled
    return scaled.gamma_arrivals(config.burstiness, seed)


def prepare(config: RunConfig, trace: Trace, profile: Profile, *, gamma_given: bool = True,
            spell: Callable[[str], str] = str, checked: bool = False) -> PreparedRun:
    """``trace`` and ``profile`` under ``config``, ready to simulate (the module's four
    steps). ``gamma_given``: whether the user set ``gamma_max`` (a default follows a
    profile whose table stops lower); ``spell`` names a setting in messages
    (``--gamma-max`` on the command line); ``checked``: the caller has already held
    the settings against the profile, built the policies and fitted the requests (a
    sweep checks its whole grid up front, once per distinct cell), so steps 2 and 4
    are left out."""
    from nightjar.sim import check_policies, servable
    from nightjar.sim.servable import OnUnfit

    settled = settle(config, profile, gamma_given=gamma_given, spell=spell, checked=checked)
    config, knobs = settled.config, settled.knobs
    scaled = arrivals(trace, config, config.seed)
    specs = tuple(config.specs(profile.drafter))
    fit = None
    if not checked:
        check_policies(specs, scaled, profile, knobs)
        fit = servable(scaled, profile, knobs, OnUnfit(config.on_unfit))
    return PreparedRun(config, profile, knobs, scaled, specs, fit)
