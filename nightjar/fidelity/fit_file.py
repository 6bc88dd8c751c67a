"""A fitted profile's file: the base checked before a run, the fit written after it
(``nightjar profile --from-run`` and ``nightjar live --profile-out``)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

from nightjar.core.records import RunResult
from nightjar.errors import NightjarInputError
from nightjar.profile.profile import Profile


def fit_base(profile: str | None, flag: str) -> Profile:
    """The base a fit corrects, checked before any work: a nightjar profile."""
    from nightjar.profile.profile import load_profile

    if profile is None:
        raise NightjarInputError(f"{flag} needs --profile: the profile the run's steps correct")
    try:
        return load_profile(profile)
    except NightjarInputError as exc:
        raise NightjarInputError(f"{flag} needs --profile to be a nightjar profile ({exc})"
                                 ) from None


def write_fitted(runs: Sequence[RunResult], base: Profile, real: Path, shown: Path, *,
                 name: str | None, command: str, sources: Sequence[str]) -> list[str]:
    """Fit ``base`` to ``runs``' steps (:func:`nightjar.fidelity.fit.fit_profile`) and
    write the profile to ``real``; the lines saying what it fitted (one per table, and
    a ``warning:`` line where the result contradicts the cost model's shape)."""
    from nightjar.fidelity.fit import fit_profile
    from nightjar.profile.check import warning
    from nightjar.results.outdir import write_out_file

    started = time.monotonic()
    data, report = fit_profile(runs, base, name=name, command=command, sources=sources)
    Profile.from_json(data, str(shown))  # validate before writing
    write_out_file(real, json.dumps(data, separators=(",", ":")) + "\n", shown)
    lines = [f"wrote {shown}: {data['name']}, fitted from {len(runs)} runs' steps on "
             f"{base.name} in {time.monotonic() - started:.1f} s"]
    for table, (fitted, total) in report.cells.items():
        if not total:
            continue  # no such table, in the base or from the runs
        lines.append(f"  {table}: {fitted} of {total} cells fitted from "
                     f"{report.steps[table]} steps (median change "
                     f"{report.median_change_pct[table]:+.1f}%); the rest are the base's")
    why = warning(data)
    if why:  # the cost model's shape, as for a measured profile: re-measure before trusting
        lines.append(f"warning: {why}")
    return lines
