#!/usr/bin/env bash
# One command for the paths of nightjar.live that only run on an NVIDIA GPU: the async
# scheduler, pinned side-stream draft offload/reload, the Triton kernels compiled for
# real, draft aliasing (where built), a lossless replay with offload cycles, and a
# short measured profile (the list and what each asserts: docs/live.md).
#
# Usage: bash scripts/gpu-check.sh [--no-install] [WORKDIR]   (default: a fresh temporary folder)
#   NIGHTJAR_GPU_VENV=DIR  the venv to install into (default: .venv-gpu in the repo)
#   --no-install           use ${PYTHON:-python3} as it is (an offline machine where torch,
#                          Triton and nightjar are importable): the checks that need vLLM
#                          print SKIP when it is not installed
#
# Installs vLLM 0.32.0 (CUDA build, the `live` extra) and this repository into that
# venv, builds tiny random-weight models locally (no download), then prints one
# "PASS|FAIL|SKIP <check> <seconds> s <detail>" line per check. Exit code: 0 all
# passed; 3 no GPU on this machine (one line, nothing installed); otherwise the
# number of failed checks (or pip's code when the install fails). The checks take
# a few minutes on one H100/H200-class GPU; the install depends on the network.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "gpu-check: FAIL no NVIDIA GPU on this machine (nvidia-smi lists none); run it on a CUDA machine" >&2
    exit 3
fi

if [ "${1:-}" = "--no-install" ]; then
    shift
    unset TRITON_INTERPRET
    exec "${PYTHON:-python3}" -m tests.gpu.gpu_check "${1:-$(mktemp -d -t nightjar-gpu-check.XXXXXX)}"
fi
venv="${NIGHTJAR_GPU_VENV:-$repo/.venv-gpu}"
work="${1:-$(mktemp -d -t nightjar-gpu-check.XXXXXX)}"
start=$SECONDS
if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv" || exit $?
fi
rc=0
"$venv/bin/python" -m pip install -q -e "$repo[live]" || rc=$?
if [ "$rc" -ne 0 ]; then
    echo "FAIL install            $((SECONDS - start)) s  pip could not install vllm==0.32.0 and nightjar" >&2
    exit "$rc"
fi
echo "PASS install            $((SECONDS - start)) s  $venv ($(nvidia-smi -L | head -n 1))"
# The kernels must be compiled, never interpreted.
unset TRITON_INTERPRET
exec "$venv/bin/python" -m tests.gpu.gpu_check "$work"
