"""Typed checks of single values, shared by the Python API, the run configuration and the
file formats: each returns the value as the product uses it or raises a one-line
:class:`~nightjar.errors.NightjarInputError` naming it.

The rules are the command line's: an integer is an integer (numpy's integers too, never
``True`` or ``3.0``), a number is finite unless the caller allows infinity, a switch is
``True`` or ``False`` (numpy's bools too, never ``"off"``, which is truthy and would turn
the switch on), and text is a ``str``.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from nightjar.errors import NightjarInputError


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def integer(value: Any, name: str, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or (
        hasattr(value, "dtype") and getattr(value.dtype, "kind", "i") == "b"
    ):
        raise NightjarInputError(f"{name} must be an integer, got {_short(value)}")
    v = int(value)
    if lo is not None and v < lo:
        raise NightjarInputError(f"{name} must be >= {lo}, got {v}")
    if hi is not None and v > hi:
        raise NightjarInputError(f"{name} must be <= {hi}, got {v}")
    return v


def number(value: Any, name: str, *, positive: bool = False, nonnegative: bool = False,
           allow_inf: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise NightjarInputError(f"{name} must be a number, got {_short(value)}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf):
        raise NightjarInputError(f"{name} must be a finite number, got {v}")
    if positive and not v > 0:
        raise NightjarInputError(f"{name} must be > 0, got {v:g}")
    if nonnegative and not v >= 0:
        raise NightjarInputError(f"{name} must be >= 0, got {v:g}")
    return v


def boolean(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if type(value).__name__ == "bool_" and type(value).__module__ == "numpy":
        return bool(value)
    raise NightjarInputError(f"{name} must be True or False, got {_short(value)}")


def text(value: Any, name: str, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise NightjarInputError(f"{name} must be a string, got {_short(value)}")
    if not empty and not value.strip():
        raise NightjarInputError(f"{name} must not be empty")
    return value
