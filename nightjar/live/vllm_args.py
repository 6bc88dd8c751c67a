"""vLLM's own engine flags on ``nightjar live``, parsed by vLLM's own parser.

``nightjar live`` owns the flags that describe a run or that it must read before an
engine starts (``--model``, ``--speculative-config``, ``--spec-tokens``,
``--max-num-seqs``, ...: ``nightjar live --help``); every other flag is vLLM's, given
as vLLM spells it, and is parsed here by ``EngineArgs.add_cli_args`` on vLLM's
``FlexibleArgumentParser`` (with ``--serve``, by vLLM's server parser, which adds its
server flags), so each of vLLM's flags works without Nightjar listing them. A flag
vLLM does not know, or a value it refuses, is one line before anything starts; so is
a flag that names a setting Nightjar already took from its own flag, and one Nightjar
cannot honour (:data:`REFUSED`). ``nightjar live --help`` therefore stays fast and
works without vLLM: the vLLM flags are checked when the command runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from nightjar.errors import NightjarInputError

# vLLM settings `nightjar live` takes from its own flags (same names); given again in
# another spelling (``-tp``, ``--max_num_seqs``) they would be set twice.
OWNED = {
    "model": "--model",
    "seed": "--seed",
    "max_model_len": "--max-model-len",
    "max_num_seqs": "--max-num-seqs",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "tensor_parallel_size": "--tensor-parallel-size",
    "speculative_config": "--speculative-config",
    "spec_method": "--spec-method",
    "spec_model": "--spec-model",
    "spec_tokens": "--spec-tokens",
    "host": "--host",
    "port": "--port",
}
# vLLM settings Nightjar cannot honour, with the reason.
REFUSED = {
    "scheduler_cls": "nightjar live runs Nightjar's scheduler; to plug Nightjar into your "
    "own vllm serve command give --scheduler-cls there (docs/live.md, drop-in)",
    "worker_cls": "nightjar live runs Nightjar's worker (it parks the draft and skips it at "
    "gamma 0); for your own vllm serve command see docs/live.md, drop-in",
    "pipeline_parallel_size": "Nightjar's scheduler and worker are built for tensor "
    "parallelism only",
    "data_parallel_size": "data parallelism runs one scheduler per replica; Nightjar "
    "drives one engine",
}
# (vLLM setting, Nightjar flag) pairs that name one setting in two spellings.
ALIASES = {
    "kv_cache_memory_bytes": "--kv-cache-gb",
    "enforce_eager": "--compile",
}


def _parser(serve: bool) -> Any:
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    if serve:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser

        parser = make_arg_parser(FlexibleArgumentParser())
    else:
        from vllm.engine.arg_utils import AsyncEngineArgs

        parser = AsyncEngineArgs.add_cli_args(FlexibleArgumentParser())

    what = "server" if serve else "engine"

    def error(message: str) -> Any:
        # The same words as nightjar.live.prometheus, which checks the server's again.
        raise NightjarInputError(f"vLLM refuses the {what} flags: {message}")

    parser.error = error
    return parser


def given_settings(flags: list[str], serve: bool = False) -> dict[str, Any]:
    """The vLLM settings ``flags`` give, by vLLM's field name, converted by vLLM.

    Only what the flags name is returned (defaults are left to the engine).
    """
    if not flags:
        return {}
    parser = _parser(serve)
    # Defaults suppressed: the namespace then holds exactly what the flags set.
    for action in parser._actions:
        if action.dest != "help":
            action.default = argparse.SUPPRESS
    # vLLM's server takes the model as a positional; Nightjar gives it with --model.
    for action in parser._actions:
        if not action.option_strings and action.dest == "model_tag":
            action.nargs = "?"
    try:
        ns = parser.parse_args(flags)
    except SystemExit:  # --help inside the vLLM flags
        raise NightjarInputError("vLLM's flags: see `vllm serve --help`") from None
    values = {k: v for k, v in vars(ns).items() if k != "model_tag"}
    values.pop("subparser", None)
    values.pop("dispatch_function", None)
    return values


def check_settings(values: dict[str, Any], nightjar: dict[str, bool]) -> None:
    """Refuse a setting Nightjar owns, cannot honour, or was given twice.

    ``nightjar`` says which of Nightjar's aliasing flags were given (``--kv-cache-gb``,
    ``--compile``).
    """
    for key in values:
        if key in OWNED:
            raise NightjarInputError(
                f"vLLM's {key} is nightjar live's {OWNED[key]}: give it once, as {OWNED[key]}"
            )
        if key in REFUSED and not (key.endswith("_size") and values[key] == 1):
            raise NightjarInputError(f"--{key.replace('_', '-')}: {REFUSED[key]}")
    for key, flag in ALIASES.items():
        if key in values and nightjar.get(flag, False):
            raise NightjarInputError(
                f"--{key.replace('_', '-')} and {flag} set the same thing: give one"
            )
    extra = values.get("additional_config")
    if isinstance(extra, dict) and "nightjar" in extra:
        raise NightjarInputError(
            "--additional-config: the \"nightjar\" key is Nightjar's own settings channel; "
            "give Nightjar's settings as nightjar live flags"
        )


def engine_args(values: dict[str, Any]) -> dict[str, Any]:
    """The checked settings as ``AsyncEngineArgs`` keywords (server-only flags dropped)."""
    if not values:
        return {}
    import dataclasses

    from vllm.engine.arg_utils import AsyncEngineArgs

    fields = {f.name for f in dataclasses.fields(AsyncEngineArgs)}
    return {k: v for k, v in values.items() if k in fields}


def take_flag(flags: list[str], flag: str) -> list[str]:
    """``flags`` without ``flag`` and its value (``--f V`` or ``--f=V``); a dotted form
    (``--f.key V``) cannot be taken apart and is refused."""
    out: list[str] = []
    skip = False
    for i, arg in enumerate(flags):
        if skip:
            skip = False
            continue
        if arg == flag:
            skip = i + 1 < len(flags)
            continue
        if arg.startswith(flag + "="):
            continue
        if arg.startswith(flag + "."):
            raise NightjarInputError(
                f"{arg}: with --serve give {flag} as one JSON object (Nightjar merges its "
                "settings into it)"
            )
        out.append(arg)
    return out


def checked_engine_args(vllm_flags: list[str], server_args: list[str], serve: bool,
                        kv_cache_gb_given: bool, compile_given: bool) -> dict[str, Any]:
    """The vLLM flags a live run passes through, parsed and checked by vLLM's parser
    (one line on a problem), as ``AsyncEngineArgs`` keywords. ``server_args`` (those
    after ``--``) are the server's and need ``serve``."""
    given = given_settings(list(vllm_flags), serve=serve)
    check_settings(given, {"--kv-cache-gb": kv_cache_gb_given, "--compile": compile_given})
    if not serve and server_args:
        raise NightjarInputError(
            "flags after -- go to vLLM's server and need --serve; give engine flags "
            "before --"
        )
    if serve:
        given_settings(list(vllm_flags) + list(server_args), serve=True)
    return engine_args(given)
