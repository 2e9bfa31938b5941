#!/usr/bin/env bash
# Cash-out acknowledgements on the SPI rail against the simulated rail, in wrk pairs in the
# same minutes: is the rail off the acknowledgement path? Two servers of the same binary run
# side by side, one on `--rail sim` and one on `pixgw spi-sim`'s SPI, each with a live
# account funded by an operator credit, paying a key of data/dict.json (a bank of the
# simulated directory, which accepts every payment). Rounds alternate sim, spi; after an SPI
# window the script waits until every payment it acknowledged has settled in the SPI (no
# amount blocked) so the next window starts from quiet.
#
#   cargo build --release && benches/spi/ack_pair.sh
# Settings: ROUNDS (2), CONNS (64), THREADS (2), DURATION (10s), BIN (target/release/pixgw),
# PERF=1 records each server's profile during its windows (perf, into the work dir),
# SIM_NICE (0: the simulator at the same priority as pixgw; 19: nearly off the two cores,
# as the central bank's SPI is in production).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/pixgw}
ROUNDS=${ROUNDS:-2}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
DURATION=${DURATION:-10s}
SIM_NICE=${SIM_NICE:-0}
OUT=$(mktemp -d /tmp/pixgw-ack-pair.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

nice -n "$SIM_NICE" "$BIN" spi-sim --dir "$OUT/sim" --participant 1234ABCD >"$OUT/sim.out" 2>"$OUT/sim.err" &
pids+=($!)
for _ in $(seq 100); do grep -q settings "$OUT/sim.out" 2>/dev/null && break; sleep 0.1; done

admin_token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
# start NAME ARGS...: a server on a free port; prints its base URL.
start() {
  local name=$1
  shift
  # One operator funds the benchmark account: the two-operator bound is raised past it.
  PIXGW_ADMIN_TOKEN="$admin_token" PIXGW_OPERATOR_CREDIT_SINGLE_MAX=1000000.00 RUST_LOG=warn \
    "$BIN" serve --data-dir "$OUT/$name" --listen 127.0.0.1:0 "$@" \
    >"$OUT/$name.out" 2>"$OUT/$name.err" &
  pids+=($!)
  for _ in $(seq 200); do grep -q "listening on" "$OUT/$name.out" 2>/dev/null && break; sleep 0.05; done
  sed -n 's/^pixgw listening on \(.*\)$/\1/p' "$OUT/$name.out" | head -1
}
sim_base=$(start sim-rail --rail sim)
spi_base=$(start spi-rail --config "$OUT/sim/pixgw-spi.toml")
spi_pid=$(pgrep -f -- "--data-dir $OUT/spi-rail" | head -1)
sim_pid=$(pgrep -f -- "--data-dir $OUT/sim-rail" | head -1)

# account BASE NAME: a live account funded by an operator credit; prints a token.
account() {
  local base=$1 name=$2 id
  PIXGW_ADMIN_TOKEN="$admin_token" "$BIN" account create --url "$base" --name "$name" --document 11222333000181 \
    --out "$OUT/acct-$name" >/dev/null
  id=$(python3 -c "import json; print(json.load(open('$OUT/acct-$name/credentials.json'))['accountId'])")
  curl -sf -X POST "$base/admin/accounts/$id/adjustments" -H "Authorization: Bearer $admin_token" \
    -H 'Content-Type: application/json' \
    -d '{"type": "CREDIT", "amount": "100000.00", "reason": "benchmark funding", "reference": "bench-1"}' >/dev/null
  curl -sf -X POST "$base/api/auth/token" -H 'Content-Type: application/json' \
    -H "X-SSL-Client-Cert: $(cat "$OUT/acct-$name/client-cert.urlencoded")" -d @"$OUT/acct-$name/token-request.json" |
    sed -E 's/.*"access_token":"([^"]+)".*/\1/'
}
sim_token=$(account "$sim_base" simrail)
spi_token=$(account "$spi_base" spirail)
read -r key doc < <(python3 -c 'import json; k=[k for k in json.load(open("data/dict.json"))["keys"] if k["keyType"]=="EMAIL"][0]; print(k["key"], k["document"])')

blocked() { curl -sf "$1/api/balance" -H "Authorization: Bearer $2" | python3 -c 'import json,sys,decimal; print("%.2f" % json.load(sys.stdin, parse_float=decimal.Decimal)["blockedBalance"])'; }
run() {
  local rail=$1 base=$2 token=$3
  if [ "${PERF:-0}" = 1 ]; then
    local pid=$sim_pid
    [ "$rail" = spi ] && pid=$spi_pid
    perf record -F 499 -g -p "$pid" -o "$OUT/perf-$rail-$round.data" -- sleep "${DURATION%s}" >/dev/null 2>&1 &
  fi
  echo "== round $round, $rail: wrk -t$THREADS -c$CONNS -d$DURATION --latency -s benches/wrk/cash_out.lua $base"
  wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s benches/wrk/cash_out.lua "$base" -- "$token" "$key" "$doc" |
    tee "$OUT/wrk-$rail-$round.txt" | grep -E 'Requests/sec|Non-2xx|50%|99%'
  local t0=$SECONDS
  for _ in $(seq 6000); do [ "$(blocked "$base" "$token")" = "0.00" ] && break; sleep 0.1; done
  echo "   settled everything $((SECONDS - t0)) s after the window; blocked now $(blocked "$base" "$token")"
}
echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%FT%TZ); simulator nice $SIM_NICE"
for round in $(seq "$ROUNDS"); do
  run sim "$sim_base" "$sim_token"
  run spi "$spi_base" "$spi_token"
done
python3 - "$OUT" "$ROUNDS" <<'EOF'
import re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def rps(rail, r):
    return float(re.search(r"Requests/sec:\s+([\d.]+)", open(f"{out}/wrk-{rail}-{r}.txt").read()).group(1))
for r in range(1, rounds + 1):
    s, p = rps("sim", r), rps("spi", r)
    print(f"round {r}: sim {s:.0f}/s, spi {p:.0f}/s, spi/sim {p / s:.2f}")
EOF
curl -s "$spi_base/metrics" | grep -E "^pixgw_(dict|icom|spi)_" | grep -v bucket > "$OUT/spi-metrics.txt"; echo "== metrics in $OUT/spi-metrics.txt"
echo "== settlement: $(curl -s "$(sed -n 's/.* control \(http[^ ]*\).*/\1/p' "$OUT/sim.out")/sim/participants" |
  python3 -c "import json,sys; p=[x for x in json.load(sys.stdin)['participants'] if x['ispb']=='1234ABCD'][0]; print('participant 1234ABCD paid', p['paid'], 'balance', p['balanceCents'], 'cents')")"
