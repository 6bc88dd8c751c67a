"""JSON Schemas of the trace and profile file formats, for editors and other tools.

Generated from the validators' own constants (:func:`trace_schema`,
:func:`profile_schema`) and shipped as ``trace.schema.json`` and
``profile.schema.json`` next to this module (``nightjar trace schema`` and ``nightjar
profile --schema`` print them). Point an editor at one (VS Code: ``json.schemas`` in the
settings, or ``"$schema"`` in the file) to get completion and red squiggles while
typing.

A schema states each field's type and range; what it cannot say (a full decode grid,
a step no cheaper than its parts, a duration after the last arrival) only nightjar's
loader checks, with its one-line messages. So every file nightjar loads is valid
under its schema, never the other way round (tests/test_schemas.py checks that).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def trace_schema() -> dict[str, Any]:
    from nightjar.trace.schema import (
        FORMAT_VERSION,
        MAX_ARRIVAL_S,
        MAX_EXPECTED_REQUESTS,
        MAX_SEED,
        MAX_TOKEN_ID,
        MIN_BURSTINESS,
    )
    from nightjar.trace.workloads import MAX_SIGMA, MAX_TOKENS, WORKLOADS

    workload = {"enum": sorted(WORKLOADS)}
    tokens = {"type": "integer", "minimum": 1, "maximum": MAX_TOKENS}
    acceptance = {"type": "number", "minimum": 0, "exclusiveMaximum": 1}
    number = {"type": "number"}
    length = {"oneOf": [tokens, {
        "type": "object", "required": ["dist"],
        "properties": {"dist": {"enum": ["lognormal", "uniform", "constant"]},
                       "mean": number, "sigma": {**number, "exclusiveMinimum": 0,
                                                 "maximum": MAX_SIGMA},
                       "min": tokens, "max": tokens, "value": tokens},
        "additionalProperties": False}]}
    request = {
        "type": "object", "required": ["arrival_s", "output_tokens"],
        "additionalProperties": False,
        "properties": {
            "arrival_s": {**number, "minimum": 0, "maximum": MAX_ARRIVAL_S,
                          "description": "seconds from the trace's start (not a Unix time)"},
            "prompt_tokens": tokens, "output_tokens": tokens, "prompt": {"type": "string"},
            "prompt_token_ids": {"type": "array", "minItems": 1, "items": {
                "type": "integer", "minimum": 0, "maximum": MAX_TOKEN_ID}},
            "workload": workload, "acceptance": acceptance, "speculate": {"type": "boolean"},
        },
    }
    segment = {
        "type": "object", "required": ["duration_s", "rate_rps"],
        "additionalProperties": False,
        "properties": {
            "duration_s": {**number, "exclusiveMinimum": 0, "maximum": MAX_ARRIVAL_S},
            "rate_rps": {**number, "minimum": 0},
            "burstiness": {**number, "minimum": MIN_BURSTINESS},
            "workload": workload,
            "mix": {"type": "object", "minProperties": 1,
                    "propertyNames": workload,
                    "additionalProperties": {**number, "exclusiveMinimum": 0}},
            "prompt_tokens": length, "output_tokens": length, "acceptance": acceptance,
            "speculate": {"type": "boolean"},
        },
    }
    return {
        "$schema": DIALECT,
        "$id": "https://nightjar.invalid/schemas/trace.schema.json",
        "title": "nightjar trace",
        "description": "docs/traces.md. Explicit requests or generative segments.",
        "type": "object", "additionalProperties": False,
        "oneOf": [{"required": ["requests"]}, {"required": ["segments"]}],
        "properties": {
            "$schema": {"type": "string"},
            "format_version": {"const": FORMAT_VERSION},
            "name": {"type": "string"}, "description": {"type": "string"},
            "seed": {"type": "integer", "minimum": 0, "maximum": MAX_SEED},
            "workload": workload,
            "duration_s": {**number, "minimum": 0, "maximum": MAX_ARRIVAL_S},
            "requests": {"type": "array", "minItems": 1, "items": request},
            "segments": {"type": "array", "minItems": 1, "items": segment},
            "max_requests": {"type": "integer", "minimum": 1,
                             "maximum": MAX_EXPECTED_REQUESTS},
        },
    }


def profile_schema() -> dict[str, Any]:
    from nightjar.core.drafter import DRAFTERS
    from nightjar.profile.format import (
        DECODE_COLUMNS,
        DRAFT_FORWARD_COLUMNS,
        FORMAT_VERSION,
        MAX_BATCH_SIZE,
        MAX_CONCENTRATION,
        MAX_CONTEXT,
        MAX_IDLE_S,
        MAX_MS,
        MAX_NUMBER,
        MEMORY_FLOAT_FIELDS,
        MEMORY_INT_FIELDS,
        MEMORY_OPTIONAL_INT_FIELDS,
        MIN_BYTES_PER_S,
        MIN_MS,
        MIXED_COLUMNS,
        PREFILL_COLUMNS,
        SOURCES,
        WAKE_COLUMNS,
    )

    ms = {"type": "number", "minimum": 0, "maximum": MAX_MS}
    column = {
        "batch_size": {"type": "integer", "minimum": 1, "maximum": MAX_BATCH_SIZE},
        "gamma": {"type": "integer", "minimum": 0},
        "context_len": {"type": "number", "minimum": 0, "maximum": MAX_CONTEXT},
        "tokens": {"type": "integer", "minimum": 1, "maximum": MAX_CONTEXT},
        "step_ms": {**ms, "minimum": MIN_MS}, "verify_ms": {**ms, "minimum": MIN_MS},
        "target_ms": {**ms, "minimum": MIN_MS}, "draft_ms": ms, "ms": ms, "added_ms": ms,
        "idle_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_IDLE_S},
    }

    def rows(columns: tuple[str, ...]) -> dict[str, Any]:
        return {"type": "array", "minItems": 1, "items": {
            "type": "array", "prefixItems": [column[c] for c in columns],
            "minItems": len(columns), "maxItems": len(columns),
            "description": "[" + ", ".join(columns) + "]"}}

    integer = {"type": "integer", "minimum": 0, "maximum": MAX_NUMBER}
    memory: dict[str, Any] = {k: integer for k in MEMORY_INT_FIELDS}
    memory.update({k: {**integer, "minimum": 1} for k in MEMORY_OPTIONAL_INT_FIELDS})
    memory.update({k: {"type": "number", "exclusiveMinimum": 0} for k in MEMORY_FLOAT_FIELDS})
    memory["gpu_memory_utilization"] = {"type": "number", "exclusiveMinimum": 0, "maximum": 1}
    for k in ("host_link_bytes_per_s", "device_bandwidth_bytes_per_s"):
        memory[k] = {"type": "number", "minimum": MIN_BYTES_PER_S}
    for k in ("device_bytes", "block_size", "target_kv_bytes_per_token"):
        memory[k] = {**integer, "minimum": 1}
    text = {"type": "string", "minLength": 1}
    return {
        "$schema": DIALECT,
        "$id": "https://nightjar.invalid/schemas/profile.schema.json",
        "title": "nightjar profile",
        "description": "docs/profiles.md. Times in milliseconds, memory in bytes.",
        "type": "object", "additionalProperties": False,
        "required": ["format_version", "name", "source", "command", "gpu", "target", "draft",
                     "memory", "decode", "draft_forward", "prefill"],
        "properties": {
            "$schema": {"type": "string"},
            "format_version": {"const": FORMAT_VERSION},
            "name": text, "source": {"enum": list(SOURCES)}, "command": text, "gpu": text,
            "target": text, "draft": text, "notes": {}, "hardware": {}, "roofline": {},
            "measured": {}, "drafter": {"enum": list(DRAFTERS)},
            "memory": {"type": "object", "additionalProperties": False,
                       "required": [*MEMORY_INT_FIELDS, *MEMORY_FLOAT_FIELDS],
                       "properties": memory},
            "decode": rows(DECODE_COLUMNS), "draft_forward": rows(DRAFT_FORWARD_COLUMNS),
            "prefill": rows(PREFILL_COLUMNS), "mixed": rows(MIXED_COLUMNS),
            "wake": rows(WAKE_COLUMNS),
            "acceptance": {"type": "object", "additionalProperties": {
                "type": "object", "required": ["mean", "concentration"],
                "additionalProperties": False,
                "properties": {"mean": {"type": "number", "exclusiveMinimum": 0,
                                        "exclusiveMaximum": 1},
                               "concentration": {"type": "number", "exclusiveMinimum": 0,
                                                 "maximum": MAX_CONCENTRATION}}}},
        },
    }


SCHEMAS = {"trace": trace_schema, "profile": profile_schema}


def schema_text(kind: str) -> str:
    """The shipped schema file's text (``trace`` or ``profile``)."""
    return resources.files(__name__).joinpath(f"{kind}.schema.json").read_text("utf-8")


def render(kind: str) -> str:
    """The schema as the shipped file holds it (tests/test_schemas.py keeps them equal)."""
    return json.dumps(SCHEMAS[kind](), indent=1, sort_keys=False) + "\n"
