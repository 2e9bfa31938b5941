#!/usr/bin/env bash
# The DICT functional test of the central bank's homologation (IN BCB 508/2024), replayed in
# minutes against `pixgw spi-sim` (the central bank's and the other institutions' side) and a
# node on the SPI rail: keys registered beforehand (1,000), every key type registered and
# looked up, a sync check, a claim against us answered within a minute, a full claim flow as
# donor and as claimer, an infraction flow (a funds recovery), and refunds for both reasons
# (`pixgw homologation dict-functional`), each step with its evidence in the report.
#
#   benches/homologation/dict_functional.sh
#
# Settings: BIN (target/release/pixgw), OUT (a new temporary directory), KEYS (1000),
# PORT (18091).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/pixgw}
OUT=${OUT:-$(mktemp -d /tmp/pixgw-dict-functional.XXXXXX)}
KEYS=${KEYS:-1000}
PORT=${PORT:-18091}
mkdir -p "$OUT"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

"$BIN" spi-sim --dir "$OUT/sim" --participant 1234ABCD >"$OUT/sim.out" 2>"$OUT/sim.err" &
pids+=("$!")
for _ in $(seq 100); do [ -s "$OUT/sim.out" ] && grep -q settings "$OUT/sim.out" && break; sleep 0.1; done
control=$(sed -n 's/.* control \(http[^ ]*\).*/\1/p' "$OUT/sim.out")
config="$OUT/sim/pixgw-spi.toml"
token=$(head -c 24 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)
PIXGW_ADMIN_TOKEN=$token PIXGW_SPI_MED_POLL_MS=1000 PIXGW_SPI_CLAIMS_POLL_MS=1000 PIXGW_SPI_SYNC_EVERY_MS=5000 \
  "$BIN" serve --config "$config" --data-dir "$OUT/node" --listen "127.0.0.1:$PORT" >"$OUT/node.out" 2>"$OUT/node.err" &
pids+=("$!")
server="http://127.0.0.1:$PORT"
for _ in $(seq 100); do curl -sf "$server/healthz" >/dev/null && break; sleep 0.1; done
echo "== node $server on the DICT of $control; work in $OUT ($(date -u +%FT%TZ), $(nproc) cores, $(git rev-parse --short HEAD))"
if PIXGW_ADMIN_TOKEN=$token "$BIN" homologation dict-functional --config "$config" --server "$server" \
    --sim-control "$control" --preload-keys "$KEYS" --report "$OUT/functional.json" >/dev/null 2>"$OUT/functional.err"; then
  echo "   PASSED"
else
  echo "   FAILED"
fi
python3 -c "
import json
r = json.load(open('$OUT/functional.json'))
for s in r['steps']:
    print(f\"   {s['name']:<20} {'passed' if s['passed'] else 'FAILED':<7} {s['seconds']:7.1f} s\")
print(f\"   total {r['elapsedSeconds']:.1f} s\")
"
