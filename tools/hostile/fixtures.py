"""The files a hostile run uses: valid inputs of every kind, and broken copies of them.

Every file argument of every command gets the same broken kinds (a FIFO, a directory,
a character device, a symlink to a FIFO, a dangling symlink, an empty file, bytes that
are not UTF-8, ...) next to the valid variants a careful user may still send (a UTF-8
byte-order mark, CRLF line ends, an odd file name). Nothing here needs vLLM.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The bundled A100 profile, copied and edited for the profile cases.
A100 = "a100-80gb/vicuna-13b+vicuna-68m"

TRACE3 = {
    "format_version": 1, "name": "t3", "seed": 0,
    "requests": [
        {"arrival_s": 0.0, "prompt_tokens": 40, "output_tokens": 6},
        {"arrival_s": 0.1, "prompt_tokens": 30, "output_tokens": 4},
        {"arrival_s": 0.3, "prompt_tokens": 20, "output_tokens": 5},
    ],
}
GPU_SPEC = {"name": "h20", "bf16_tflops": 148, "memory_bandwidth_gb_s": 4000,
            "memory_gib": 95.6, "host_link_gb_s": 50}
MODEL_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048,
    "num_hidden_layers": 16, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 8192, "vocab_size": 32000, "torch_dtype": "bfloat16",
    "max_position_embeddings": 4096,
}
DRAFT_CONFIG = {**MODEL_CONFIG, "hidden_size": 512, "num_hidden_layers": 2,
                "num_attention_heads": 8, "num_key_value_heads": 8, "intermediate_size": 1024}
AZURE = ("TIMESTAMP,ContextTokens,GeneratedTokens\n"
         "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n"
         "2023-11-16 18:15:51.0000000,879,20\n")
VIDUR = "arrived_at,num_prefill_tokens,num_decode_tokens\n0.0,40,6\n0.2,30,4\n0.5,20,5\n"
BURSTGPT = ("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,320,1407,Conversation log\n"
            "118,GPT-4,417,294,711,Conversation log\n")
SHAREGPT = [{"conversations": [{"from": "human", "value": "Hello there, how are you?"},
                               {"from": "gpt", "value": "Fine, thanks. And you?"}]},
            {"conversations": [{"from": "human", "value": "Write a haiku."},
                               {"from": "gpt", "value": "Leaves fall in silence"}]}]
VLLM_JSONL = '{"prompt": "Hello there"}\n{"prompt": "Tell me a story", "output_tokens": 8}\n'


def sweep_toml(trace: Path) -> str:
    return f'trace = ["{trace}"]\npolicy = ["nospec", "fixed:1"]\nseeds = 1\n'


@dataclass(frozen=True)
class FileArg:
    """One file argument of the product: what valid content it takes, its extension."""

    name: str
    ext: str
    valid: Callable[[Path], str]  # the valid text, given the fixture root


# Broken kinds: the product must refuse each with one line naming the file, at once.
BROKEN = ("missing", "directory", "fifo", "devnull", "devzero", "symlink-fifo", "dangling",
          "empty", "binary", "latin1", "nul", "truncated", "deep", "hugeint", "array",
          "symlink-loop")
# Valid variants: the product must read each as the plain file.
VALID = ("plain", "bom", "crlf", "odd-name", "symlink")


def make_kind(root: Path, arg: FileArg, kind: str) -> Path:
    """A file of ``kind`` for ``arg`` under ``root/files/``; returns the path to pass."""
    base = root / "files" / arg.name
    base.mkdir(parents=True, exist_ok=True)
    text = arg.valid(root)
    path = base / f"{kind}{arg.ext}"
    if kind == "odd-name":
        path = base / f"odd name é;$(x){arg.ext}"
    if os.path.lexists(path):
        return path
    if kind == "missing":
        return base / f"missing{arg.ext}"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "devnull":
        return Path("/dev/null")
    elif kind == "devzero":
        return Path("/dev/zero")
    elif kind == "symlink-fifo":
        fifo = base / f"target-fifo{arg.ext}"
        if not fifo.exists():
            os.mkfifo(fifo)
        path.symlink_to(fifo)
    elif kind == "dangling":
        path.symlink_to(base / "nowhere")
    elif kind == "symlink-loop":
        path.symlink_to(path)
    elif kind == "symlink":
        real = base / f"real{arg.ext}"
        real.write_text(text, encoding="utf-8")
        path.symlink_to(real)
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
    elif kind == "latin1":
        path.write_bytes(text.replace("a", "\u00e9", 1).encode("latin-1", "replace") + b"\xe9\xff")
    elif kind == "nul":
        path.write_bytes(text.encode() + b"\x00\x00")
    elif kind == "truncated":
        path.write_text(text[: max(1, len(text) // 2)], encoding="utf-8")
    elif kind == "deep":
        path.write_text("[" * 100000 + "]" * 100000, encoding="utf-8")
    elif kind == "hugeint":
        path.write_text("1" + "0" * 5000, encoding="utf-8")
    elif kind == "array":
        path.write_text("[1, 2, 3]\n", encoding="utf-8")
    elif kind == "bom":
        path.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    elif kind == "crlf":
        path.write_bytes(text.replace("\n", "\r\n").encode("utf-8"))
    else:  # plain, odd-name
        path.write_text(text, encoding="utf-8")
    return path


def write_json(path: Path, obj: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1) + "\n", encoding="utf-8")
    return path
