"""What a run was: its resolved settings, the command, the build, and its inputs by hash.

Every summary row (``summary.csv``, each ``summary.json``, the API's frames) carries
these columns, so that two run folders can be told apart and a run reproduced from
its folder alone. The settings are the run's :class:`nightjar.run.config.RunConfig`
after it was held against the profile (``gamma_max`` settled, ``offload`` auto
resolved, ``max_model_len`` the profile's window unless set lower), defaults
included; ``acceptance_source`` names where the simulated acceptance rates came
from, since they largely decide whether speculation pays.

Invariant: every key :func:`of_run` returns is in :data:`KEYS`, and no key of
:data:`KEYS` is a summary metric, so a reader tells the two apart by name.
"""

from __future__ import annotations

import functools
import hashlib
import json
import shlex
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nightjar.profile.profile import Profile
    from nightjar.run.config import RunConfig
    from nightjar.trace.trace import Trace

# RunConfig fields a summary row records under their own name. Left out: the policy
# list and the seed (each row has its own), the SLO limits (``slo_ttft_s`` and
# ``slo_tpot_s`` are summary columns already); ``engine`` is a summary column (sim or
# live), so the scheduling mode is recorded as ``scheduling``.
SETTINGS = (
    "rate_scale", "burstiness", "offload", "reload", "draft_kv", "acceptance", "gamma_max",
    "max_num_seqs", "max_num_batched_tokens", "prior", "max_model_len", "on_unfit", "oracle",
    "alternatives",
)
RENAMED = {"engine": "scheduling"}
RUN_KEYS = (
    "profile_sha256", "trace_sha256", "trace_requests", "acceptance_source",
    "nightjar_version", "nightjar_build", "command",
)
# What a live run records beyond the settings it shares with the simulator.
LIVE_KEYS = ("model", "drafter", "draft", "tensor_parallel_size", "vllm_version")
KEYS = frozenset((*SETTINGS, *RENAMED.values(), *RUN_KEYS, *LIVE_KEYS))
# Hex digits of a content hash kept: enough to tell inputs apart, short enough to read.
HASH_DIGITS = 16


def command_line(argv: Sequence[str] | None = None) -> str:
    """The command as a user would type it again (``nightjar`` for the program);
    ``nightjar.cli.main`` records the same for the arguments it was given."""
    args = list(sys.argv[1:] if argv is None else argv)
    return shlex.join(["nightjar", *args])


def api_call_site(function: str = "nightjar.simulate") -> str:
    """What ran an API call of ``function``: the Python program and its arguments (a
    notebook's kernel shows as its launcher)."""
    return "python " + shlex.join(sys.argv) + f" ({function})"


def version() -> str:
    import nightjar

    return str(nightjar.__version__)


@functools.cache
def build() -> str:
    """How this Nightjar was built: the simulator compiled or not, and the checkout's
    commit (``+dirty`` with uncommitted changes) where it runs from a git checkout."""
    from importlib.machinery import EXTENSION_SUFFIXES

    # Where mypyc built the step loop, Python imports the extension over the source
    # beside it (nightjar.sim.COMPILED); looked up, not imported: results sit below sim.
    sim = Path(__file__).resolve().parents[1] / "sim"
    compiled = any((sim / f"engine{suffix}").exists() for suffix in EXTENSION_SUFFIXES)
    kind = "compiled" if compiled else "pure Python"
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return kind
    try:
        head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain",
                                "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return kind
    return f"{kind}, git {head.stdout.strip()}{'+dirty' if dirty.stdout.strip() else ''}"


def profile_hash(profile: Profile) -> str:
    text = json.dumps(profile.to_json(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_DIGITS]


def trace_hash(trace: Trace) -> str:
    """Over the request columns the simulator reads, so the same requests hash the same
    whichever file format held them."""
    h = hashlib.sha256()
    for column in (trace.arrival_s, trace.prompt_tokens, trace.output_tokens,
                   trace.acceptance):
        h.update(column.tobytes())
    h.update("\0".join(map(str, trace.workload.tolist())).encode())
    return h.hexdigest()[:HASH_DIGITS]


def acceptance_source(trace: Trace, profile: Profile) -> str:
    """Where the run's per-request acceptance rates came from, most common first: the
    trace's own rates, the profile's (``measured`` or ``assumed`` by the profile's
    source), or the workload's default."""
    import numpy as np

    fixed = ~np.isnan(trace.acceptance)
    sources: dict[str, int] = {}
    if fixed.any():
        sources["trace"] = int(fixed.sum())
    kind = "profile (measured)" if profile.source == "measured" else "profile (assumed)"
    for name in sorted(set(trace.workload[~fixed].tolist())):
        n = int((trace.workload[~fixed] == name).sum())
        where = kind if profile.acceptance(name) is not None else "workload default"
        sources[f"{where}: {name}"] = sources.get(f"{where}: {name}", 0) + n
    return "; ".join(k for k, _ in sorted(sources.items(), key=lambda kv: -kv[1]))


def settings_row(config: RunConfig, offload_on: bool) -> dict[str, Any]:
    """The settings columns of ``config`` (``offload`` as it ran: on or off)."""
    values = config.values()
    row: dict[str, Any] = {k: values[k] for k in SETTINGS}
    row["offload"] = "on" if offload_on else "off"
    for field, column in RENAMED.items():
        row[column] = values[field]
    return row


def of_run(
    config: RunConfig, offload_on: bool, trace: Trace, profile: Profile,
    argv: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Every provenance column of a simulated run (``trace`` as simulated);
    ``max_model_len`` as it ran: the smaller of the setting and the profile's window."""
    row = settings_row(config, offload_on)
    row["max_model_len"] = profile.memory.window(row["max_model_len"])
    return {
        **row,
        "profile_sha256": profile_hash(profile),
        "trace_sha256": trace_hash(trace),
        "trace_requests": len(trace),
        "acceptance_source": acceptance_source(trace, profile),
        "nightjar_version": version(),
        "nightjar_build": build(),
        "command": command_line(argv),
    }


def of_live_run(settings: Mapping[str, Any], trace: Trace, command: str) -> dict[str, Any]:
    """Every provenance column of a live run: ``settings`` (its shared settings and the
    :data:`LIVE_KEYS` it knows), the trace as served, the build and the command."""
    unknown = set(settings) - KEYS
    if unknown:
        raise ValueError(f"not a provenance key: {sorted(unknown)[0]}")
    return {
        **settings,
        "trace_sha256": trace_hash(trace),
        "trace_requests": len(trace),
        "nightjar_version": version(),
        "nightjar_build": build(),
        "command": command,
    }


def differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Provenance keys whose values differ between two rows (``None`` where absent),
    the command line left out: it differs with any setting."""
    skip = {"command"}
    keys = [k for k in (*SETTINGS, *RENAMED.values(), *RUN_KEYS, *LIVE_KEYS) if k not in skip]
    return {k: (a.get(k), b.get(k)) for k in keys if _norm(a.get(k)) != _norm(b.get(k))}


def _norm(value: Any) -> Any:
    # A value read back from a CSV is text or a float where it was written as an int.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value != value:  # NaN: an absent cell
        return None
    return value
