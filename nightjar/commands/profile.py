"""``nightjar profile``: measure (vLLM), model (roofline), fit from runs, list and show
profiles.

Measured profiling (``--model PATH --draft PATH --out FILE`` without ``--roofline``)
runs the real vLLM engine through ``nightjar.commands.profile_measured``; vLLM is imported only
on that path, so the other modes work without it.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import TYPE_CHECKING, Any

from nightjar.core.defaults import DEFAULT_MAX_NUM_SEQS
from nightjar.errors import NightjarInputError

if TYPE_CHECKING:
    from nightjar.roofline.request import RooflineRequest

SHOW_BATCHES = (1, 4, 16, 32, 64, 128, 256)
SHOW_GAMMAS = (0, 1, 2, 3, 4)


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "profile", help="generate, list or show latency/memory profiles", description=__doc__
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--roofline",
        action="store_true",
        help="generate a profile from the analytic roofline model",
    )
    mode.add_argument("--list", action="store_true", help="list GPUs, models and profiles")
    mode.add_argument("--show", metavar="NAME", help="summarise a profile (name or path)")
    mode.add_argument("--schema", action="store_true",
                      help="print the profile format's JSON Schema (for editors)")
    mode.add_argument("--from-run", nargs="+", metavar="RUN", default=None,
                      help="fit a profile from live runs' own steps (folders `nightjar live` "
                      "or `bench live` wrote); cells they never reached stay --base's")
    f = p.add_argument_group("fit from runs (--from-run)")
    f.add_argument("--base", metavar="PROFILE",
                   help="the profile the fit corrects (bundled name or file)")
    f.add_argument("--name", default=None,
                   help="the fitted profile's name (default: the base's, with +runs)")
    p.add_argument("--gpu", help="GPU name for --roofline (see --list)")
    p.add_argument(
        "--model",
        help="target: catalog name or its HF id (--roofline); preset, path or cached HF id "
        "(measured)",
    )
    p.add_argument("--draft", help="draft model (measured: default the preset's)")
    p.add_argument(
        "--drafter", default=None, metavar="KIND",
        help="drafter kind: draft_model (default, with --draft), eagle, eagle3, mtp (derived "
        "from the target), ngram, suffix (a host lookup); measured profiling takes vLLM's "
        "method the same way (or its --speculative-config)",
    )
    p.add_argument(
        "--speculative-config", default=None, metavar="JSON",
        help="measured: vLLM's speculative config (method, model and the method's keys; "
        "num_speculative_tokens comes from --gammas)",
    )
    a = p.add_argument_group("any model, any GPU, tensor parallelism (--roofline)")
    a.add_argument("--model-config", metavar="CONFIG",
                   help="target shape from a Hugging Face config.json (or its directory), "
                   "instead of --model")
    a.add_argument("--draft-config", metavar="CONFIG",
                   help="draft shape from a Hugging Face config.json, instead of --draft")
    a.add_argument("--gpu-spec", metavar="SPEC",
                   help="a GPU not in the catalogue: JSON/TOML file or key=value,... "
                   "(docs/roofline.md), instead of --gpu")
    # vLLM's spelling beside the short one, as nightjar live takes both.
    a.add_argument("--tp", "--tensor-parallel-size", "-tp", dest="tp", type=int, default=None,
                   metavar="N", help="tensor-parallel degree: target and draft split over N "
                   "GPUs (default 1)")
    p.add_argument("--out", help="where to write the profile JSON")
    p.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    p.add_argument(
        "--activation-reserve-bytes",
        type=int,
        default=None,
        help="override the estimated activation reserve (calibration)",
    )
    p.add_argument(
        "--gpu-memory-utilization",
        type=float,
        default=None,
        help="fraction of device memory vLLM may use (default 0.9)",
    )
    p.add_argument("--block-size", type=int, default=None, help="KV block size in tokens")
    d = p.add_argument_group("deployment pins (--roofline; a paper's exact settings)")
    d.add_argument("--num-gpu-blocks-override", type=int, default=None, metavar="N",
                   help="KV blocks with the draft resident (vLLM's flag of that name)")
    d.add_argument("--num-gpu-blocks-no-draft", type=int, default=None, metavar="N",
                   help="KV blocks without the draft (default: the override, else the model)")
    d.add_argument("--max-model-len", type=int, default=None, metavar="L",
                   help="cap prompt + output tokens (and the context grid) at L")
    d.add_argument("--enforce-eager", action="store_true",
                   help="no CUDA graphs: every kernel dispatched from the host (eager "
                   "overhead terms; see `profile --show`)")
    d.add_argument("--verify-attention", default=None, metavar="MODEL",
                   help="verify-pass attention: query-aware (default; each request's KV "
                   "read once) or expansion (B*(gamma+1) reads, older vLLM's batch expansion)")
    d.add_argument("--variant", default=None,
                   help="name suffix: the profile is called <gpu>-<variant>/<target>+<draft>")
    p.add_argument(
        "--context", type=float, default=512.0, help="context length for --show (default 512)"
    )
    m = p.add_argument_group("measured profiling (vLLM)")
    m.add_argument("--batch-sizes", default=None,
                   help="decode batch sizes, measured as given (default 1, 2, 4, ... up to "
                   "--max-num-seqs, cut to what the KV pool holds; a larger batch is priced "
                   "along the table's last segment)")
    m.add_argument("--max-num-seqs", type=int, default=DEFAULT_MAX_NUM_SEQS, metavar="N",
                   help=f"the engine's batch cap, the default sizes' largest (default "
                   f"{DEFAULT_MAX_NUM_SEQS}, as nightjar live)")
    m.add_argument("--gammas", default="0,1,2,3", help="speculation lengths, 0..G")
    m.add_argument("--contexts", default="32,512",
                   help="mean decode context lengths (default: short chat turns to 512; "
                   "lookups outside are priced at the edge)")
    m.add_argument(
        "--prefill-lengths",
        default="1,16,64,256,1024,2048,4096,8192",
        help="prefill step sizes in tokens (split into prompts of at most 512 tokens, or "
        "the largest context when smaller)",
    )
    m.add_argument("--mixed-batch-sizes", default="1,8,32,56",
                   help="decode batch sizes of the measured mixed steps (decodes + a prompt "
                   "chunk in one step); '' to skip them")
    m.add_argument("--mixed-tokens", default="64,256,1024,1984",
                   help="prompt tokens arriving while those decode (within the token budget)")
    m.add_argument("--wake-pauses", default="0.25,0.5,1,2,4",
                   help="seconds of idle before the prefills that measure what waking an idle "
                   "engine adds to its next step (the profile's wake table); '' to skip")
    m.add_argument("--add-mixed-to", metavar="PROFILE", default=None,
                   help="measure only the mixed steps and write PROFILE with them added to --out")
    m.add_argument(
        "--output-tokens", type=int, default=32, help="tokens decoded per measured request"
    )
    m.add_argument("--no-ladders", action="store_true",
                   help="one decode window (and one prefill of its prompts) per batch size, "
                   "instead of batches that shrink through the sizes after one prefill")
    m.add_argument("--repeats", type=int, default=2,
                   help="passes over the grid (interleaved: each cell's windows minutes apart)")
    m.add_argument("--remeasure", type=int, default=2,
                   help="passes re-measuring decode cells cheaper than a smaller gamma or "
                   "batch; still inconsistent after them, the profile is not written")
    m.add_argument("--keep-inconsistent", action="store_true",
                   help="write the profile even with such cells (listed in its header)")
    m.add_argument("--kv-cache-gb", type=float, default=1.0, help="KV pool size (GiB)")
    m.add_argument("--prompts", default=None, help="text file, one prompt per line (acceptance)")
    m.add_argument(
        "--workload", default="synthetic", help="workload the measured acceptance is stored as"
    )
    m.add_argument("--seed", type=int, default=0, help="seed of the engines and prompts")
    m.add_argument(
        "--in-process",
        action="store_true",
        help="engine core in this process: quick start, but steps faster than a live run's",
    )
    m.add_argument(
        "--verbose",
        action="store_true",
        help="show vLLM's whole log (by default warnings only; the full log is written next "
        "to --out as NAME.vllm.log either way)",
    )
    m.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.list:
        return _list()
    if args.schema:
        from nightjar.schemas import schema_text

        print(schema_text("profile"), end="")
        return 0
    if args.show:
        return _show(args.show, args.context)
    if args.from_run is not None:
        from nightjar.commands.profile_fit import run_fit

        return run_fit(args)
    if args.base is not None or args.name is not None:
        raise NightjarInputError("--base and --name only with --from-run")
    if args.roofline:
        return _roofline(args)
    from nightjar.roofline.request import ROOFLINE_ONLY

    given = [f"--{k.replace('_', '-')}" for k in ROOFLINE_ONLY if getattr(args, k) is not None]
    if given:
        raise NightjarInputError(f"{', '.join(given)} only with --roofline")
    if args.model:
        from nightjar.commands.profile_measured import run_measured

        return int(run_measured(args))
    raise NightjarInputError("nothing to do: give --roofline, --list, --show NAME or --model")


def _request(args: argparse.Namespace) -> RooflineRequest:
    from dataclasses import fields

    from nightjar.roofline.request import RooflineRequest

    return RooflineRequest(**{f.name: getattr(args, f.name) for f in fields(RooflineRequest)})


def _roofline(args: argparse.Namespace) -> int:
    from nightjar.profile.profile import Profile
    from nightjar.results.outdir import check_out_file, write_out_file
    from nightjar.roofline.costs import build_profile

    request = _request(args)
    gpu, target, draft = request.inputs()
    params = request.params()
    out = request.out_path(gpu, target, draft)
    real = check_out_file(out, args.force, inputs=request.input_files())
    data = build_profile(
        gpu, target, draft, request.command(), params, request.activation_reserve_bytes,
        request.deployment(), request.ranks, drafter=request.kind,
    )
    profile = Profile.from_json(data, str(out))  # validate before writing
    write_out_file(real, json.dumps(data, separators=(",", ":")) + "\n", out)
    mem = profile.memory
    print(
        f"wrote {out}: {profile.name} (roofline), KV blocks {mem.kv_blocks(False)} without "
        f"draft, {mem.kv_blocks(True)} with"
    )
    return 0


def _list() -> int:
    from rich.console import Console
    from rich.table import Table

    from nightjar.profile.profile import bundled_profiles
    from nightjar.roofline.hardware import GPUS, MODELS

    console = Console()
    gpus = Table(
        "GPU", "description", "bf16 TFLOP/s", "HBM GB/s", "memory GiB", "host GB/s", title="GPUs"
    )
    for g in GPUS.values():
        gpus.add_row(
            g.name,
            g.description,
            f"{g.peak_flops / 1e12:.0f}",
            f"{g.mem_bandwidth_bytes_per_s / 1e9:.0f}",
            f"{g.memory_bytes / 2**30:.1f}",
            f"{g.host_link_bytes_per_s / 1e9:.0f}",
        )
    models = Table(
        "model", "params", "layers", "hidden", "heads/kv", "KV KiB/token", title="models"
    )
    for m in MODELS.values():
        models.add_row(
            m.name,
            f"{m.params / 1e9:.3f}B",
            str(m.layers),
            str(m.hidden),
            f"{m.heads}/{m.kv_heads}",
            f"{m.kv_bytes_per_token / 1024:g}",
        )
    console.print(gpus, models)
    console.print("models by Hugging Face id (accepted wherever a model name is):")
    for m in MODELS.values():
        console.print(f"  {m.hf_id} = {m.name}", soft_wrap=True)
    console.print("bundled profiles:")
    for name in bundled_profiles():
        console.print(f"  {name}")
    return 0


def _show(name: str, context: float) -> int:
    from rich.console import Console
    from rich.table import Table

    from nightjar.profile.profile import load_profile

    p = load_profile(name)
    if not p.min_context_len <= context <= p.max_context_len:
        # A lookup would be priced at the table's edge; a table shown "at" a context it
        # does not cover would mislabel those numbers.
        raise NightjarInputError(
            f"--context {context:g}: context length outside the table's range "
            f"{p.min_context_len:g}..{p.max_context_len:g}"
        )
    gammas = [g for g in SHOW_GAMMAS if g <= p.gamma_max]
    table = Table(
        "B",
        *[f"gamma {g}" for g in gammas],
        title=f"{p.name}: decode step ms at context {context:g} ({p.source})",
    )
    for b in SHOW_BATCHES:
        if p.min_batch_size <= b <= p.max_batch_size:
            table.add_row(str(b), *[f"{p.step_time_s(b, g, context) * 1e3:.2f}" for g in gammas])
    console = Console()
    console.print(table)
    mem = p.memory
    with_d, without = mem.kv_blocks(True), mem.kv_blocks(False)
    share = 1 - with_d / without if without else 0.0
    console.print(
        f"KV blocks ({mem.block_size} tokens): {without} without draft, {with_d} with "
        f"(draft costs {share:.1%}); draft transfer {mem.draft_transfer_s * 1e3:.1f} ms"
    )
    window = mem.max_model_len
    console.print(f"max_model_len: {window} tokens (prompts past it refused, answers "
                  "stopped at it)" if window is not None else "max_model_len: not set")
    _show_acceptance(console, p)
    tp = p.to_json().get("hardware", {}).get("tensor_parallel")
    if tp:
        console.print(
            f"tensor parallel {tp}: memory and KV blocks are per GPU; two all-reduces per "
            "layer per forward in every step time"
        )
    from nightjar.profile.measured_lines import measured_lines

    for line in measured_lines(p.to_json().get("measured")):
        console.print(line, soft_wrap=True)
    _show_overheads(console, p.to_json().get("roofline"), p.to_json().get("notes"))
    console.print(f"command: {p.command}")
    return 0


def _show_acceptance(console: Any, p: Any) -> None:
    """The acceptance each workload is simulated with, and where it comes from: it
    largely decides whether speculation pays, so an assumption is named as one."""
    from nightjar.trace.workloads import WORKLOADS

    whose = "measured" if p.source == "measured" else "assumed by the profile"
    for w in p.workloads:
        acc = p.acceptance(w)
        assert acc is not None
        console.print(f"acceptance {w}: mean {acc[0]:.2f}, concentration {acc[1]:g} ({whose})")
    others = [w for w in WORKLOADS.values() if w.name not in p.workloads]
    if others:
        defaults = ", ".join(f"{w.name} {w.acceptance_mean:.2f}" for w in others)
        console.print(f"acceptance of other workloads: the workload default, not this pair's "
                      f"(mean {defaults})", soft_wrap=True)


# Profile "roofline" keys -> the overhead term (nightjar.roofline.calibration.overheads) they hold.
_OVERHEAD_KEYS = (
    ("forward_overhead_s", "forward", "per forward (host)"),
    ("layer_overhead_s", "layer", "per layer (host dispatch)"),
    ("step_overhead_s", "step", "per step (fixed)"),
    ("seq_overhead_s", "per_seq", "per sequence per step"),
    ("sample_overhead_s", "sample", "per sampling call"),
    ("spec_overhead_s", "rejection", "rejection sampling per spec step"),
    ("spec_seq_overhead_s", "spec_per_seq", "per sequence per spec step"),
)


def _show_overheads(console: Any, roof: Any, notes: Any = None) -> None:
    """The roofline's kernel table, verify model and overhead terms with their sources."""
    from rich.table import Table

    from nightjar.roofline.calibration.overheads import TERMS, term_source

    if not isinstance(roof, dict) or "forward_overhead_s" not in roof:
        return  # a measured profile, or one made before the calibrated roofline
    mode = str(roof.get("execution", "graph"))
    fit = str(roof.get("op_fit", "?"))
    whose = "Vidur's " if fit in ("a100", "a40", "h100") else "measured "
    console.print(
        f"roofline: kernels fitted to {whose}{fit.upper()} op "
        f"tables, {mode} execution, verify attention {roof.get('verify_attention', '?')}"
    )
    # A borrowed fit's GEMM half-efficiency token count, scaled by the ridge point.
    scaled = re.search(r"GEMM half-efficiency token count scaled[^;]*", str(notes or ""))
    if scaled:
        console.print(scaled.group(0))
    table = Table("term", "us", "source", title="overhead terms")
    for key, term, label in _OVERHEAD_KEYS:
        value = roof.get(key)
        if not isinstance(value, int | float):
            continue
        default = TERMS[term].get(mode)
        source = "?" if default is None else term_source(term, mode)
        if default is not None and abs(value - default.value) > 1e-12:
            source = f"set in the profile (default {default.value * 1e6:g} us: {source})"
        table.add_row(label, f"{value * 1e6:g}", source)
    console.print(table)
