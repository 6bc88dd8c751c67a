"""The CUDA-only paths of nightjar.live, checked on a real NVIDIA GPU in a few minutes.

``scripts/gpu-check.sh`` installs the CUDA stack and runs ``python -m
tests.gpu.gpu_check WORKDIR``. Each check prints one line,
``PASS|FAIL|SKIP <name> <seconds> s  <detail>``, and the exit code is the number of
failed checks (capped at 100); a machine without a CUDA device gets one line and
exit code 3 before anything runs. What each check covers is listed in docs/live.md.
The checks are the product's own code paths (the worker plugin, the Triton
kernels, the profiler); none of them runs on this repository's CPU-only CI.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

NO_GPU_EXIT = 3


class CheckFailed(AssertionError):
    """A check's condition did not hold (its message is the FAIL line's detail)."""


class Skipped(Exception):
    """The check does not apply to this build (its message says why)."""


def need(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def _workload(n: int, seed: int, vocab: int) -> tuple[list[list[int]], list[int]]:
    rng = random.Random(seed)
    prompts = [[rng.randrange(3, vocab) for _ in range(rng.randrange(3, 100))] for _ in range(n)]
    return prompts, [rng.randrange(8, 80) for _ in range(n)]


def _need_vllm() -> None:
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise Skipped("vLLM is not installed in this Python (an offline --no-install run)")


def _engine(spec: Any) -> contextlib.AbstractContextManager[Any]:
    from nightjar.live.engine_spec import open_llm

    return cast("contextlib.AbstractContextManager[Any]", open_llm(spec))


def _greedy(llm: Any, prompts: list[list[int]], max_tokens: list[int]) -> list[list[int]]:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    params = [SamplingParams(temperature=0.0, max_tokens=m, ignore_eos=True) for m in max_tokens]
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts], params, use_tqdm=False)
    return [list(o.outputs[0].token_ids) for o in outs]


class Checks:
    """The checks, in the order they run; each returns its PASS line's detail."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self._models: Any = None
        self._reference: dict[str, list[list[int]]] = {}

    # -- helpers ---------------------------------------------------------------

    def models(self) -> Any:
        if self._models is None:
            from nightjar.live.tiny import SMALL, build

            self._models = build(self.work / "tiny", SMALL)
        return self._models

    def reference(self, name: str, prompts: list[list[int]], max_tokens: list[int]) -> Any:
        """vLLM without speculation on the same prompts (the lossless yardstick)."""
        if name not in self._reference:
            from nightjar.live.engine_spec import EngineSpec
            from nightjar.live.settings import LiveSettings

            spec = EngineSpec(
                str(self.models().target), None, LiveSettings(gamma_max=0), **self._base()
            )
            with _engine(spec) as llm:
                self._reference[name] = _greedy(llm, prompts, max_tokens)
        return self._reference[name]

    def _base(self) -> dict[str, Any]:
        return dict(max_model_len=512, max_num_seqs=16, kv_cache_bytes=64 << 20)

    def _lossless(self, name: str, settings: Any, async_scheduling: bool, n: int) -> str:
        _need_vllm()
        from nightjar.live.engine_spec import EngineSpec
        from nightjar.live.steplog import read_log

        prompts, max_tokens = _workload(n, 7, 2048)
        reference = self.reference(f"{n}", prompts, max_tokens)
        models = self.models()
        spec = EngineSpec(
            str(models.target),
            str(models.draft),
            settings,
            async_scheduling=async_scheduling,
            **self._base(),
        )
        with _engine(spec) as llm:
            got = _greedy(llm, prompts, max_tokens)
            counts = llm.collective_rpc("nightjar_draft_counts")[0]
        bad = [i for i, (a, b) in enumerate(zip(reference, got, strict=True)) if a != b]
        need(not bad, f"{len(bad)}/{n} requests differ from vLLM without speculation")
        contents = read_log(Path(settings.step_log))
        steps = [s for s in contents.steps if s.batch_size > 0]
        gammas = sorted({s.gamma for s in steps})
        accepted = sum(s.accepted for s in steps)
        need(len(gammas) >= 2, f"gamma never changed ({gammas})")
        need(accepted > 0, "no draft token was accepted")
        need(counts["failed"] == 0, f"{counts['failed']} draft transfers failed")
        done = [e["event"] for e in contents.events if e["event"].endswith("_done")]
        return f"{n} requests identical; gammas {gammas}; {accepted} accepted; moves {done}"

    # -- checks ----------------------------------------------------------------

    def cuda(self) -> str:
        import torch

        from nightjar.live.version import check_vllm_version

        need(torch.cuda.is_available(), "torch sees no CUDA device")
        from nightjar.errors import NightjarInputError

        try:
            version = f"vLLM {check_vllm_version()}"
        except NightjarInputError as why:  # not installed, or not the supported one
            version = f"{why}; the engine checks will be skipped or fail"
        props = torch.cuda.get_device_properties(0)
        return (
            f"{props.name}, {props.total_memory / 2**30:.0f} GiB, torch {torch.__version__}, "
            f"{version}"
        )

    def triton_kernels(self) -> str:
        import torch

        from nightjar.live.kernels.ops import migrate_blocks, pack, pack_offsets, unpack
        from nightjar.live.kernels.triton_impl import INTERPRET

        need(not INTERPRET, "TRITON_INTERPRET is set: the kernels would be interpreted")
        dev = torch.device("cuda")
        gen = torch.Generator(device=dev).manual_seed(0)
        # FlashAttention's default physical order [blocks, block_size, heads, 2*head].
        layers = [
            torch.randn(512, 16, 8, 256, device=dev, generator=gen).permute(0, 2, 1, 3)
            for _ in range(4)
        ]
        want = [t.clone() for t in layers]
        pairs = [(s, d) for s, d in zip(range(400, 512), range(10, 122), strict=True)]
        src = torch.tensor([s for s, _ in pairs], device=dev)
        dst = torch.tensor([d for _, d in pairs], device=dev)
        for t in want:
            t.index_copy_(0, dst, t.index_select(0, src))
        torch.cuda.synchronize()
        start = time.perf_counter()
        migrate_blocks(layers, pairs, backend="triton")
        torch.cuda.synchronize()
        migrate_s = time.perf_counter() - start
        for got, ref in zip(layers, want, strict=True):
            need(torch.equal(got.view(torch.int32), ref.view(torch.int32)), "migration differs")
        params = [torch.randn(n, device=dev, generator=gen) for n in (1, 777, 4096, 1 << 20)]
        offsets, size = pack_offsets(params)
        buffer = torch.zeros(size, dtype=torch.uint8, device=dev)
        pack(params, buffer, offsets, backend="triton")
        back = [torch.empty_like(p) for p in params]
        unpack(back, buffer, offsets, backend="triton")
        torch.cuda.synchronize()
        for p, b in zip(params, back, strict=True):
            need(torch.equal(p.view(torch.int32), b.view(torch.int32)), "pack/unpack differs")
        moved = 2 * len(pairs) * 4 * layers[0][0].numel() * 4
        return f"compiled; migration {moved / migrate_s / 1e9:.1f} GB/s (first launch incl.)"

    def parking(self) -> str:
        import torch

        from nightjar.live.residency.parking import WeightParking

        dev = torch.device("cuda")
        torch.manual_seed(0)
        model = torch.nn.Sequential(*(torch.nn.Linear(2048, 2048) for _ in range(16))).to(dev)
        want = {k: v.detach().clone() for k, v in model.state_dict().items()}
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated(dev)
        parking = WeightParking(model)  # pins its host buffers here, once
        rates = []
        for cycle in range(2):
            start = time.perf_counter()
            moved = parking.park()
            park_s = time.perf_counter() - start
            freed = before - torch.cuda.memory_allocated(dev)
            host = list(parking._host.values())
            need(all(t.is_pinned() for t in host), "host copies are not pinned")
            need(parking._stream is not None, "no side stream was used")
            need(freed >= moved, f"only {freed} of {moved} bytes left the device")
            start = time.perf_counter()
            parking.restore()
            torch.cuda.current_stream(dev).synchronize()
            restore_s = time.perf_counter() - start
            # No loop variable may keep a weight alive: the next cycle counts freed bytes.
            back = model.state_dict()
            need(all(v.device.type == "cuda" for v in back.values()), "a weight is not back")
            same = all(torch.equal(back[k], want[k]) for k in want)
            need(same, f"cycle {cycle}: a weight changed across offload/reload")
            del back
            gb = moved / 1e9
            rates.append(f"offload {gb / park_s:.1f} GB/s, reload {gb / restore_s:.1f} GB/s")
        return f"{moved / 1e9:.2f} GB, pinned once, 2 cycles: " + "; ".join(rates)

    def alias_in_place(self) -> str:
        """Draft weights as views into KV-shaped CUDA tensors, used in place (no vLLM)."""
        import torch

        from nightjar.live.residency.alias import (
            AliasedParking,
            WeightCorruption,
            blocks_needed,
            splittable_rows,
        )

        dev, dtype = torch.device("cuda"), torch.bfloat16
        torch.manual_seed(0)
        hidden, inter, vocab, layers = 896, 4864, 32000, 8  # Qwen2.5-0.5B widths
        draft = _mlp_stack(hidden, inter, vocab, layers).to(dev, dtype)
        ids = torch.randint(0, vocab, (64,), device=dev)
        with torch.no_grad():
            want = draft(ids)
            plain_s = _cuda_time(lambda: draft(ids))
        # Blocks-first KV tensors (FlashAttention's physical order): one block of one
        # layer = K and V of 16 tokens x 8 heads x 128 dims in bf16 = 64 KiB.
        block = (2, 16, 8, 128)
        block_bytes = 2 * 16 * 8 * 128 * 2
        sizes = [p.numel() * p.element_size() for p in draft.parameters()]
        # Tensors larger than a layer's chunk (embedding, LM head) split by rows.
        rows = [splittable_rows(p) for p in draft.parameters()]
        region_blocks = blocks_needed(sizes, [block_bytes] * layers, 256, rows)
        total = region_blocks + 64
        kv = [torch.zeros(total, *block, device=dev, dtype=dtype) for _ in range(layers)]
        region = range(total - region_blocks, total)
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated(dev)
        aliased = AliasedParking(draft, kv, region, align=256)
        torch.cuda.synchronize()
        freed = before - torch.cuda.memory_allocated(dev)
        need(aliased.inside_region(), "a parameter does not lie inside the KV region")
        need(freed >= sum(sizes), f"only {freed} of {sum(sizes)} bytes were released")
        with torch.no_grad():
            need(torch.equal(draft(ids), want), "the aliased draft computes something else")
            aliased_s = _cuda_time(lambda: draft(ids))
            for cycle in range(2):
                aliased.park()
                need(all(p.numel() == 0 for p in draft.parameters()), "park left weights")
                kv[0][region.start : region.stop].normal_()  # the KV pool reuses the region
                aliased.restore()
                need(aliased.inside_region(), f"cycle {cycle}: restored outside the region")
                need(torch.equal(draft(ids), want), f"cycle {cycle}: output changed")
        kv[0][region.start].add_(1.0)  # a KV write into a block the draft holds
        try:
            aliased.park()
        except WeightCorruption:
            caught = True
        else:
            caught = False
        need(caught, "an overwritten region block went unnoticed at offload")
        ratio = region_blocks * block_bytes * layers / sum(sizes)
        return (
            f"{sum(sizes) / 2**20:.0f} MiB of weights in {region_blocks} blocks x {layers} "
            f"layers ({ratio:.2f}x; split: {','.join(aliased.split_names) or 'none'}); forward "
            f"{plain_s * 1e3:.3f} -> {aliased_s * 1e3:.3f} ms aliased; 2 cycles bit-exact; "
            "corruption caught"
        )

    def aliasing(self) -> str:
        try:
            from nightjar.live.residency import alias  # noqa: F401
        except ImportError:
            raise Skipped("draft aliasing is not built in this version") from None
        # The module exists: its CUDA check is the lossless replay below with
        # aliasing on (see docs/kernels.md).
        from nightjar.live.settings import LiveSettings

        settings = LiveSettings(
            policy="cycle:3,0,2,1/3",
            gamma_max=3,
            step_log=str(self.work / "alias.jsonl"),
            draft_kv="skip",
            forced_residency={8: "offload", 20: "reload"},
        )
        # The ballast is sized from the draft's shapes (docs/kernels.md).
        aliased = _with(settings, alias=True)
        return self._lossless("aliasing", aliased, False, 32)

    def async_scheduler(self) -> str:
        from nightjar.live.settings import LiveSettings

        settings = LiveSettings(
            policy="cycle:3,0,2,1/3",
            gamma_max=3,
            step_log=str(self.work / "async.jsonl"),
        )
        return self._lossless("async", settings, True, 32)

    def lossless_offload(self) -> str:
        from nightjar.live.settings import LiveSettings

        settings = LiveSettings(
            policy="cycle:3,0,2,1/3",
            gamma_max=3,
            step_log=str(self.work / "offload.jsonl"),
            draft_kv="skip",
            reload="migrate",
            forced_residency={8: "offload", 20: "reload", 32: "offload", 44: "reload"},
        )
        detail = self._lossless("offload", settings, False, 56)
        need(detail.count("_done") == 4, f"not two offload/reload cycles: {detail}")
        return detail

    def profile(self) -> str:
        import json

        _need_vllm()
        models = self.models()
        out = self.work / "profile.json"
        cmd = [
            sys.executable,
            "-c",
            "import sys; from nightjar.cli import main; sys.exit(main())",
            "profile",
            "--model",
            str(models.target),
            "--draft",
            str(models.draft),
            "--batch-sizes",
            "1,8",
            "--contexts",
            "32",
            "--repeats",
            "1",
            "--out",
            str(out),
            "--force",
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        need(done.returncode == 0, f"nightjar profile exited {done.returncode}: "
             f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        data = json.loads(out.read_text())
        rows = data.get("decode") or data.get("decode_table") or []
        need(bool(rows), "the profile has no decode rows")
        return f"{len(rows)} decode rows measured -> {out}"


def _mlp_stack(hidden: int, inter: int, vocab: int, layers: int) -> Any:
    """Embedding, residual MLP blocks and an LM head: a draft's tensors, no vLLM."""
    import torch

    class Stack(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, hidden)
            self.up = torch.nn.ModuleList(
                torch.nn.Linear(hidden, 2 * inter, bias=False) for _ in range(layers)
            )
            self.down = torch.nn.ModuleList(
                torch.nn.Linear(inter, hidden, bias=False) for _ in range(layers)
            )
            self.head = torch.nn.Linear(hidden, vocab, bias=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            x = self.embed(ids)
            for up, down in zip(self.up, self.down, strict=True):
                gate, val = up(x).chunk(2, dim=-1)
                x = x + down(torch.nn.functional.silu(gate) * val)
            return self.head(x)

    return Stack()


def _cuda_time(fn: Callable[[], object], reps: int = 20) -> float:
    """Median seconds of one call on the current CUDA stream (CUDA events)."""
    import statistics

    import torch

    for _ in range(3):
        fn()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(float(start.elapsed_time(end)) * 1e-3)
    return float(statistics.median(times))


def _with(settings: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(settings, **changes)


ORDER = (
    "cuda",
    "triton_kernels",
    "parking",
    "alias_in_place",
    "async_scheduler",
    "lossless_offload",
    "aliasing",
    "profile",
)


def run_checks(checks: Checks, names: tuple[str, ...], emit: Callable[[str], None]) -> int:
    """Run the named checks in order; returns how many failed."""
    failed = 0
    for name in names:
        start = time.perf_counter()
        try:
            detail = getattr(checks, name)()
            status = "PASS"
        except Skipped as why:
            detail, status = str(why), "SKIP"
        except Exception as exc:  # a check's failure must not stop the others
            status = "FAIL"
            detail = f"{type(exc).__name__}: {exc}".splitlines()[0]
            traceback.print_exc(file=sys.stderr)
            failed += 1
            if name == "cuda":  # nothing else can run
                emit(f"FAIL {name:<17} {time.perf_counter() - start:6.1f} s  {detail}")
                return failed
        emit(f"{status} {name:<17} {time.perf_counter() - start:6.1f} s  {detail}")
    return failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("work", type=Path, help="folder for the tiny models and outputs")
    parser.add_argument("--only", default=None, help="comma-separated check names")
    args = parser.parse_args(argv)
    names = tuple(args.only.split(",")) if args.only else ORDER
    unknown = [n for n in names if n not in ORDER]
    if unknown:
        print(f"gpu-check: unknown checks {unknown}; known: {', '.join(ORDER)}")
        return 2
    import torch

    if not torch.cuda.is_available():
        print("gpu-check: FAIL no CUDA device visible to torch; these checks need an NVIDIA GPU")
        return NO_GPU_EXIT
    from nightjar.live.engine_spec import prepare_env

    prepare_env()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    args.work.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    failed = run_checks(Checks(args.work), names, lambda line: print(line, flush=True))
    verdict = "all passed" if not failed else f"{failed} failed"
    print(f"gpu-check: {verdict} in {time.perf_counter() - start:.0f} s", flush=True)
    return min(failed, 100)


if __name__ == "__main__":
    sys.exit(main())
