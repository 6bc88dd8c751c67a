#!/usr/bin/env bash
# Run ALONE (a live benchmark, ~12 min on 2 cores). A short live-ramp benchmark (2
# rounds: nospec, fixed:3, nightjar+ and the noise twin) on the 2026-12-03 profile, a
# profile fitted from its steps, then the 2026-12-03 live-spec-loses benchmark (held
# out: no step of it in the fit) validated on that fit at each run's speed and at the
# profile's. Writes OUT (default reports/simulator/ramp-YYYYmmdd).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-reports/simulator/ramp-$(date +%Y%m%d)}
A=reports/simulator/agreement-20261203d
mkdir -p "$OUT"
cp -n "$A/profile.json" "$OUT/profile.json"
LD_PRELOAD=$(find "$PWD/.venv-live" -name libiomp5.so | head -n1)
export LD_PRELOAD
M=${MODELS:-/tmp/agree-models}  # the tiny pair (seeded: the same weights every time)
[ -d "$M/target" ] || .venv-live/bin/python -m nightjar.live.tiny "$M" >/dev/null
uptime | tee "$OUT/uptime-before.txt"
.venv-live/bin/nightjar bench live --model "$M/target" --draft "$M/draft" \
  --trace live-ramp --policy nospec --policy fixed:3 --policy nightjar+ --repeats 2 \
  --profile "$OUT/profile.json" --out "$OUT/bench-live-ramp" --force 2>&1 | tail -40 > "$OUT/bench.txt"
uptime | tee "$OUT/uptime-after.txt"
unset LD_PRELOAD
.venv/bin/nightjar profile --from-run "$OUT/bench-live-ramp" --base "$A/profile.json" \
  --out "$OUT/profile-from-ramp.json" --force > "$OUT/fit.txt" 2>&1
for base in profile run; do
  .venv/bin/nightjar validate --live-run "$A/bench-live-spec-loses" --profile "$OUT/profile-from-ramp.json" \
    --time-base "$base" --out "$OUT/validate-live-spec-loses-fitted-$base" --force \
    > "$OUT/validate-live-spec-loses-fitted-$base.txt" 2>&1
done
echo done
