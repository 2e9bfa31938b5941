#!/usr/bin/env bash
# The DICT capacity test of the central bank's homologation (IN BCB 508/2024), against
# `pixgw spi-sim`: distinct keys looked up at a steady pace by this participant's DICT client
# (`pixgw homologation dict-capacity`), 1,000 in 60 s, then 10,000 in 600 s, each with its
# report. The simulator's DICT holds the keys (seeded) and charges every lookup to the
# participant's and the payer's buckets, as the DICT's anti-scan policy does.
#
#   benches/homologation/dict_capacity.sh                 # both runs (about 11 minutes)
#   SHORT=1 benches/homologation/dict_capacity.sh         # the 60 s run only
#
# Settings: BIN (target/release/pixgw), OUT (a new temporary directory).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/pixgw}
OUT=${OUT:-$(mktemp -d /tmp/pixgw-dict-capacity.XXXXXX)}
mkdir -p "$OUT"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"$BIN" spi-sim --dir "$OUT/sim" --participant 1234ABCD >"$OUT/sim.out" 2>"$OUT/sim.err" &
pids+=("$!")
for _ in $(seq 100); do [ -s "$OUT/sim.out" ] && grep -q settings "$OUT/sim.out" && break; sleep 0.1; done
control=$(sed -n 's/.* control \(http[^ ]*\).*/\1/p' "$OUT/sim.out")
config="$OUT/sim/pixgw-spi.toml"
curl -sf -X POST "$control/sim/dict/seed" -H 'Content-Type: application/json' -d '{"count": 11000}' >/dev/null
echo "== the DICT of $control holds 11,000 keys; work in $OUT ($(date -u +%FT%TZ), $(nproc) cores, $(git rev-parse --short HEAD))"

run() {
  local n=$1 within=$2 name=$3
  echo "== $n distinct keys in ${within} s"
  if "$BIN" homologation dict-capacity --config "$config" --lookups "$n" --within-seconds "$within" \
      --report "$OUT/$name.json" >/dev/null 2>"$OUT/$name.err"; then
    echo "   PASSED"
  else
    echo "   FAILED"
  fi
  python3 -c "import json; r=json.load(open('$OUT/$name.json')); print('   ' + ', '.join(f'{k} {v}' for k, v in r.items()))"
}
run 1000 60 capacity-1000
[ "${SHORT:-0}" = 1 ] || run 10000 600 capacity-10000
