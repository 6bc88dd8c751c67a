"""A sweep's grid: what varies, read from flags or a TOML file, validated, expanded to cells.

Every axis is a list; the grid is their cross product. ``seeds`` is either a count
(``3`` means seeds 0, 1, 2) or an explicit list; ``seed = 5`` in a file is the one seed
5, as ``sim --seed 5``. Flags given on the command line win
over the file's values, and the file's over the defaults. The SLO limits are not an
axis: one pair applies to the whole sweep (and is part of every cell's identity).
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import math
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nightjar.core.slo import Slo
from nightjar.errors import NightjarInputError
from nightjar.profile.profile import DEFAULT_PROFILE
from nightjar.reading import as_path, loads_toml, read_text
from nightjar.run.config import AXIS, SCALAR, RunConfig, offload_mode
from nightjar.run.config import CHOICES as RUN_CHOICES
from nightjar.sweep.cell import Cell

_D = RunConfig()  # the defaults every entry point shares (nightjar.run.config)
CHOICES = {name: choices for name, choices in RUN_CHOICES.items() if name != "on_unfit"}
_TYPES = typing.get_type_hints(RunConfig)


def _element(name: str) -> type:
    """A setting's value type, None taken off (``max_model_len``: an int or absent)."""
    args = [a for a in typing.get_args(_TYPES[name]) if a is not type(None)]
    return args[0] if args else _TYPES[name]  # type: ignore[no-any-return]


# Axis name -> (element type, default values), made from RunConfig's fields: every
# setting a sweep varies (AXIS), framed by the trace and profile and by the three the
# grid names itself. The order is the grid's nesting order (the last axis varies
# fastest), which is also the row order of the table.
AXES: dict[str, tuple[type, tuple[Any, ...]]] = {
    "trace": (str, ("burst",)),
    "profile": (str, (DEFAULT_PROFILE,)),
    # max_model_len None: no limit beyond the KV cache (a TOML file cannot spell None:
    # leave it out).
    **{name: (_element(name), (getattr(_D, name),)) for name in RunConfig.fields_swept(AXIS)},
    "rate_scale": (float, (_D.rate_scale,)),
    "policy": (str, _D.policies),
    "seeds": (int, (_D.seed,)),
}
# One value for the whole sweep (part of every cell's identity).
SCALARS: dict[str, Any] = {name: getattr(_D, name) for name in RunConfig.fields_swept(SCALAR)}
KEYS = tuple(AXES) + tuple(SCALARS)
# More cells than this is a typo (seeds = 1000000000), not a sweep: at a second or more
# per cell it would run for days, and listing the grid alone would exhaust memory.
MAX_CELLS = 1_000_000


@dataclass(frozen=True)
class SweepSpec:
    """The validated grid. ``axes`` maps every name in :data:`AXES` to its values."""

    axes: dict[str, tuple[Any, ...]]
    slo: Slo
    on_unfit: str = _D.on_unfit

    def num_cells(self) -> int:
        return math.prod(len(v) for v in self.axes.values())

    def cells(self) -> list[Cell]:
        """Every point of the grid, unchecked (the sweep's plan checks each distinct
        one: a million cells must not each pay for the checks)."""
        names = list(AXES)
        swept = RunConfig.fields_swept(AXIS)
        fixed: dict[str, Any] = {"on_unfit": self.on_unfit, "slo_ttft": self.slo.ttft_s,
                 "slo_tpot": self.slo.tpot_s, "oracle": False}
        out: list[Cell] = []
        for combo in itertools.product(*(self.axes[n] for n in names)):
            v = dict(zip(names, combo, strict=True))
            settings = RunConfig(**{n: v[n] for n in swept}, **fixed, policies=(v["policy"],),
                                 seed=v["seeds"], rate_scale=v["rate_scale"])
            out.append(Cell(trace=v["trace"], profile=v["profile"], settings=settings))
        return out

    def to_json(self) -> dict[str, Any]:
        return {**{k: list(v) for k, v in self.axes.items()},
                "slo_ttft": self.slo.ttft_s, "slo_tpot": self.slo.tpot_s,
                "on_unfit": self.on_unfit}


def read_config(path: Path) -> dict[str, Any]:
    """The TOML file's keys (top level, or under a ``[sweep]`` table)."""
    what = f"--config {path}"
    data = loads_toml(read_text(as_path(path, "--config"), what), what)
    if set(data) == {"sweep"} and isinstance(data["sweep"], dict):
        data = data["sweep"]
    # The file may spell axes in the plural, as people write them in prose.
    plural = {"traces": "trace", "profiles": "profile", "policies": "policy",
              "rate_scales": "rate_scale", "seed": "seeds"}
    out: dict[str, Any] = {}
    for key, value in data.items():
        axis = plural.get(key, key)
        if axis in out:
            # Both spellings: one list would silently win over the other.
            twin = next(k for k in data if k != key and plural.get(k, k) == axis)
            raise NightjarInputError(f"{what}: {twin!r} and {key!r} name the same axis; "
                                     "give one")
        if key == "seed" and isinstance(value, int) and not isinstance(value, bool):
            # seed = 5 is the seed 5, as sim --seed 5; seeds = 5 counts seeds 0..4.
            value = [value]
        out[axis] = value
    return out


def _label(name: str, where: str) -> str:
    """How the user wrote a key: ``--gamma-max`` on the command line, ``gamma_max`` in
    the file (named) or the API."""
    if where == "flags":
        return "--" + name.replace("_", "-")
    return f"{where}: {name}"


def _unknown(key: str, where: str) -> NightjarInputError:
    near = difflib.get_close_matches(key, KEYS, n=1)
    hint = f" (did you mean {near[0]!r}?)" if near else ""
    return NightjarInputError(f"{where}: unknown key {key!r}{hint}")


def _values(name: str, raw: Any, where: str) -> tuple[Any, ...]:
    kind = AXES[name][0]
    if name == "seeds" and isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise NightjarInputError(f"{_label(name, where)} must be >= 1 (got {raw})")
        if raw > MAX_CELLS:
            raise NightjarInputError(
                f"{_label(name, where)} {raw} makes more than {MAX_CELLS} cells")
        raw = list(range(raw))
    items = list(raw) if isinstance(raw, list | tuple) else [raw]
    if not items:
        raise NightjarInputError(f"{_label(name, where)}: empty grid: no values")
    out: list[Any] = []
    for item in items:
        out.append(_one(name, kind, item, where))
    if len(set(out)) != len(out):
        raise NightjarInputError(f"{_label(name, where)} lists a value twice")
    return tuple(out)


def _one(name: str, kind: type, item: Any, where: str) -> Any:
    if item is None and name in ("max_model_len", "burstiness"):  # None: not set
        return None
    if name == "offload":
        item = offload_mode(item)
    if kind is float:
        if isinstance(item, bool) or not isinstance(item, int | float) or not (
            math.isfinite(item) and item > 0
        ):
            raise NightjarInputError(
                f"{_label(name, where)} {item!r}: must be a finite number > 0"
            )
        return float(item)
    if kind is int:
        if isinstance(item, bool) or not isinstance(item, int):
            raise NightjarInputError(f"{_label(name, where)} {item!r}: must be an integer")
        low = 0 if name == "seeds" else 1
        if item < low:
            raise NightjarInputError(f"{_label(name, where)} {item}: must be >= {low}")
        return item
    if not isinstance(item, str) or not item.strip():
        raise NightjarInputError(f"{_label(name, where)} {item!r}: must be a non-empty string")
    if name in CHOICES and item not in CHOICES[name]:
        raise NightjarInputError(
            f"{_label(name, where)} {item!r}: choose from {', '.join(CHOICES[name])}"
        )
    return item.strip()


def build_spec(
    file_values: Mapping[str, Any] | None = None,
    flag_values: Mapping[str, Any] | None = None,
    *,
    source: str = "sweep",
) -> SweepSpec:
    """Merge defaults, file values and flag values (later wins) into a validated spec.

    Flag values hold only the flags the user gave (``None`` means not given).
    """
    merged: dict[str, tuple[Any, str]] = {}
    for where, values in ((source, file_values or {}), ("flags", flag_values or {})):
        for key, raw in values.items():
            if key not in KEYS:
                raise _unknown(key, where)
            if raw is not None:
                merged[key] = (raw, where)
    axes: dict[str, tuple[Any, ...]] = {}
    for name, (_, default) in AXES.items():
        raw, where = merged.get(name, (list(default), "defaults"))
        axes[name] = _values(name, raw, where)
    cells = math.prod(len(v) for v in axes.values())
    if cells > MAX_CELLS:
        raise NightjarInputError(
            f"{source}: the grid has {cells} cells, more than the {MAX_CELLS} a sweep runs "
            f"({' x '.join(f'{len(v)} {k}' for k, v in axes.items() if len(v) > 1)})")
    scalars: dict[str, float] = {}
    on_unfit, where = merged.get("on_unfit", (_D.on_unfit, "defaults"))
    if on_unfit not in RUN_CHOICES["on_unfit"]:
        raise NightjarInputError(f"{_label('on_unfit', where)} {on_unfit!r}: choose from "
                                 f"{', '.join(RUN_CHOICES['on_unfit'])}")
    for name, default_value in SCALARS.items():
        if name == "on_unfit":
            continue
        raw, where = merged.get(name, (default_value, "defaults"))
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise NightjarInputError(
                f"{_label(name, where)} must be a number of seconds (got {raw!r})")
        scalars[name] = float(raw)
    for name in ("slo_ttft", "slo_tpot"):
        if not (math.isfinite(scalars[name]) and scalars[name] > 0):
            where = merged.get(name, (None, "defaults"))[1]
            raise NightjarInputError(
                f"{_label(name, where)} {scalars[name]:g}: must be a finite number of seconds > 0")
    slo = Slo(ttft_s=scalars["slo_ttft"], tpot_s=scalars["slo_tpot"])
    return SweepSpec(axes=axes, slo=slo, on_unfit=on_unfit)


def split_list(text: str, flag: str) -> list[str]:
    """``"0.5,1,2"`` -> ``["0.5", "1", "2"]``; an empty item is an error."""
    items = [t.strip() for t in text.split(",")]
    if any(not t for t in items):
        raise NightjarInputError(f"{flag} {text!r}: empty item in the list")
    return items


def parse_numbers(texts: Sequence[str], flag: str, kind: type) -> list[Any]:
    out: list[Any] = []
    for text in texts:
        for item in split_list(text, flag):
            try:
                out.append(kind(item))
            except ValueError:
                what = "a number" if kind is float else "an integer"
                raise NightjarInputError(f"{flag}: bad value {item!r} (expected {what})") from None
    return out


def with_axis(spec: SweepSpec, name: str, values: Sequence[Any]) -> SweepSpec:
    """A copy of ``spec`` with one axis replaced (validated like any other input)."""
    return dataclasses.replace(spec, axes={**spec.axes, name: _values(name, list(values), name)})
