#!/usr/bin/env bash
# Runs a command with N CPU-bound processes beside it (default 2), as a busy laptop or a
# shared CI runner would: the live tests must pass so (issue 24: they assert what the
# engine did, never that the machine was fast enough for a wall-clock schedule).
#
# Usage: bash scripts/with-load.sh [-n N] COMMAND [ARGS...]
#   e.g. bash scripts/with-load.sh .venv-live/bin/pytest -m live tests/live -q
#   or   bash scripts/test.sh --live-under-load   (the whole live suite this way)
#
# The busy loops are plain Python `while True: pass` processes at normal priority; they
# are stopped (by their process ids) when the command ends, however it ends.
set -euo pipefail

n=2
if [ "${1:-}" = "-n" ]; then
    n="$2"
    shift 2
fi
if [ "$#" -eq 0 ]; then
    echo "usage: bash scripts/with-load.sh [-n N] COMMAND [ARGS...]" >&2
    exit 2
fi

pids=()
stop() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
}
trap stop EXIT INT TERM HUP

for _ in $(seq "$n"); do
    python3 -c 'while True: pass' &
    pids+=("$!")
done
echo "with-load: $n busy processes (${pids[*]}) beside: $*" >&2
"$@"
