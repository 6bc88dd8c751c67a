"""A GPU described by the user (``--gpu-spec``) rather than taken from the catalogue.

The spec is a JSON or TOML file, or the same keys inline as ``key=value`` pairs
separated by commas::

    name=h20,bf16_tflops=148,memory_bandwidth_gb_s=4000,memory_gib=95.6,host_link_gb_s=50

Units are in the key names (decimal TB/GB, binary GiB for memory, as ``nvidia-smi``
reports it); ``nvlink_gb_s`` (GPU-to-GPU, per direction; only for ``--tp``), ``like`` (a catalogue
GPU of the same architecture whose measured tables stand in for this one) and
``description`` are optional.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any

from nightjar.errors import NightjarInputError
from nightjar.reading import as_path, loads_json, loads_toml, read_text
from nightjar.roofline.hardware import GPU, GPUS

MAX_VALUE = 1e7
REQUIRED = ("bf16_tflops", "memory_bandwidth_gb_s", "memory_gib", "host_link_gb_s")
OPTIONAL_NUMBERS = ("nvlink_gb_s",)
OPTIONAL_TEXT = ("name", "description", "like")


def _read(spec: str) -> dict[str, Any]:
    path = as_path(spec, "--gpu-spec")
    if path.suffix.lower() in (".json", ".toml") or os.path.lexists(path):
        what = f"--gpu-spec {spec}"
        text = read_text(path, what)
        data = loads_json(text, what) if path.suffix.lower() != ".toml" else loads_toml(
            text, what)
        if not isinstance(data, dict):
            raise NightjarInputError(f"--gpu-spec {spec} must hold an object of keys")
        return data
    out: dict[str, Any] = {}
    for part in spec.split(","):
        key, eq, value = part.partition("=")
        if not eq or not key.strip():
            raise NightjarInputError(
                f"--gpu-spec: {part!r} is not key=value (nor is {spec!r} a readable file)"
            )
        out[key.strip()] = value.strip()
    return out


def _number(data: dict[str, Any], key: str) -> float:
    raw = data[key]
    try:
        value = float(raw) if not isinstance(raw, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise NightjarInputError(f"--gpu-spec: {key} must be a positive number, got {raw!r}")
    if value > MAX_VALUE:
        # TFLOPS, GB/s and GiB: no device is a million times today's largest.
        raise NightjarInputError(f"--gpu-spec: {key} {value:g} is beyond any device "
                                 f"(at most {MAX_VALUE:g} in the key's unit)")
    return value


def parse_gpu_spec(spec: str) -> GPU:
    data = _read(spec)
    unknown = sorted(set(data) - set(REQUIRED) - set(OPTIONAL_NUMBERS) - set(OPTIONAL_TEXT))
    if unknown:
        known = ", ".join((*REQUIRED, *OPTIONAL_NUMBERS, *OPTIONAL_TEXT))
        raise NightjarInputError(f"--gpu-spec: unknown key {unknown[0]!r} (known: {known})")
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        raise NightjarInputError(f"--gpu-spec: missing {', '.join(missing)}")
    name = str(data.get("name", "custom-gpu")).lower()
    if not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", name):
        raise NightjarInputError(
            f"--gpu-spec: name must be letters, digits, '.', '_' and '-', got {name!r}"
        )
    nvlink = _number(data, "nvlink_gb_s") * 1e9 if "nvlink_gb_s" in data else 0.0
    like = str(data["like"]).lower() if "like" in data else None
    if like is not None and like not in GPUS:
        raise NightjarInputError(
            f"--gpu-spec: like={like!r} is not a catalogue GPU ({', '.join(sorted(GPUS))})"
        )
    return GPU(
        name=name,
        description=str(data.get("description", f"{name} (--gpu-spec)")),
        peak_flops=_number(data, "bf16_tflops") * 1e12,
        mem_bandwidth_bytes_per_s=_number(data, "memory_bandwidth_gb_s") * 1e9,
        memory_bytes=int(_number(data, "memory_gib") * 2**30),
        host_link_bytes_per_s=_number(data, "host_link_gb_s") * 1e9,
        nvlink_bytes_per_s=nvlink,
        all_reduce_table=GPUS[like].all_reduce_table if like else None,
        like=like,
    )
