#!/usr/bin/env bash
# The simulator-versus-engine agreement check, end to end, on the CPU engine and the
# tiny pair: a measured profile, one live benchmark over every validation trace (the
# traces share its rounds, so each is measured in the machine states the others were:
# a fit from some traces and a validation on another compare like with like), and
# `nightjar validate` over each trace's benchmark; then the results table
# (experiments/agreement_table.py). Run it ALONE on the machine: every figure is only
# as good as the machine was quiet (each run's foreign load is recorded and runs others
# disturbed are rerun).
#
#   bash scripts/agreement.sh [OUT]          # default OUT: reports/agreement-YYYYmmdd-HHMM
#   REPEATS=4 TRACES="live-spec-wins live-shift" bash scripts/agreement.sh OUT
#
# Environment: VENV (default .venv-live, built by scripts/install-live.sh), REPEATS
# (rounds per trace, default 3), TRACES (bundled names or paths; default the four
# validation traces), HOLDOUT_SEED (seed of the held-out trace generated here, one
# the profile and the trace design never saw; default 2027; "none" runs no held-out
# trace), POLICIES (default the five of the goal), PROFILE_ARGS (extra `nightjar
# profile` flags, e.g. a --batch-sizes grid; where the profiler refuses a noisy
# measurement, PROFILE_ARGS=--keep-inconsistent keeps it). Writes OUT/profile.json,
# OUT/bench-<trace>/, OUT/validate-<trace>/ (+ .txt, what validate printed),
# OUT/validate-run-<trace>/ (each run at its own speed, `--time-base run`), OUT/table.md
# and OUT/table-run.md.
set -euo pipefail

cd "$(dirname "$0")/.."
VENV=${VENV:-.venv-live}
OUT=${1:-reports/agreement-$(date +%Y%m%d-%H%M)}
REPEATS=${REPEATS:-3}
TRACES=${TRACES:-"live-spec-wins live-spec-loses live-shift live-ramp"}
HOLDOUT_SEED=${HOLDOUT_SEED:-2027}
POLICIES=${POLICIES:-"nospec fixed:3 nightjar nightjar-code nightjar+"}
PY="$VENV/bin/python"
NJ="$VENV/bin/nightjar"
[ -x "$NJ" ] || { echo "no $NJ: run scripts/install-live.sh $VENV first" >&2; exit 2; }
LD_PRELOAD=$(find "$(cd "$VENV" && pwd)" -name libiomp5.so | head -1)
export LD_PRELOAD
mkdir -p "$OUT"

# The held-out trace: another workload (Alpaca-like lengths, not the validation traces'
# uniform ones) and another shape (calm, a bursty peak, a middle load), drawn with a
# seed nobody tuned on.
ALL_TRACES="$TRACES"
if [ "$HOLDOUT_SEED" != none ]; then
    HOLDOUT="$OUT/holdout-$HOLDOUT_SEED.json"  # named as the trace: bench-holdout-SEED/
    "$NJ" trace gen --workload alpaca --segments "0.5:25,8:20:0.5,2:25" --seed "$HOLDOUT_SEED" \
        --name "holdout-$HOLDOUT_SEED" --out "$HOLDOUT" --force >/dev/null
    ALL_TRACES="$TRACES $HOLDOUT"
fi

policy_flags=()
for p in $POLICIES; do policy_flags+=(--policy "$p"); done
n_policies=$(wc -w <<<"$POLICIES")

# Expected duration: the profile (budget 10 min; it prints its own estimate), then per trace
# REPEATS x (policies + the noise twin) runs of about the trace's span plus its tail.
expected=$("$PY" - "$REPEATS" "$n_policies" $ALL_TRACES <<'EOF'
import sys
from nightjar.trace.trace import load_trace
repeats, policies, traces = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
total = 10 * 60.0
for name in traces:
    t = load_trace(name)
    span = float(t.arrival_s.max() - t.arrival_s.min())
    total += repeats * (policies + 1) * (span * 1.6 + 12) + 150
print(f"{total / 60:.0f}")
EOF
)
echo "agreement check: profile + ${REPEATS} rounds x $((n_policies + 1)) runs on each of:" \
     "$ALL_TRACES; expected about ${expected} min. Output: $OUT"
uptime

"$PY" -m nightjar.live.tiny "$OUT/models" >/dev/null
T="$OUT/models/target"
D="$OUT/models/draft"

if [ ! -f "$OUT/profile.json" ]; then
    # shellcheck disable=SC2086  # PROFILE_ARGS is a list of flags
    "$NJ" profile --model "$T" --draft "$D" ${PROFILE_ARGS:-} --out "$OUT/profile.json"
fi

trace_flags=()
names=()
missing=0
for trace in $ALL_TRACES; do
    trace_flags+=(--trace "$trace")
    names+=("$(basename "$trace" .json)")
    [ -f "$OUT/bench-${names[-1]}/bench.json" ] || missing=1
done
if [ "$missing" = 1 ]; then
    # One trace writes its benchmark into --out itself; several, each into OUT/bench-NAME/.
    bench_out="$OUT"
    [ "${#names[@]}" -gt 1 ] || bench_out="$OUT/bench-${names[0]}"
    "$NJ" bench live --model "$T" --draft "$D" "${trace_flags[@]}" "${policy_flags[@]}" \
        --repeats "$REPEATS" --profile "$OUT/profile.json" --out "$bench_out" --force
fi

for name in "${names[@]}"; do
    "$NJ" validate --live-run "$OUT/bench-$name" --profile "$OUT/profile.json" \
        --out "$OUT/validate-$name" --force | tee "$OUT/validate-$name.txt"
    # Each run at its own speed as well: the machine's drift between runs taken out.
    "$NJ" validate --live-run "$OUT/bench-$name" --profile "$OUT/profile.json" \
        --time-base run --out "$OUT/validate-run-$name" --force > "$OUT/validate-run-$name.txt"
done
uptime

"$PY" experiments/agreement_table.py "$OUT" | tee "$OUT/table.md"
"$PY" experiments/agreement_table.py "$OUT" run > "$OUT/table-run.md"
echo "wrote $OUT/table.md and $OUT/table-run.md (each run at its own speed)"
