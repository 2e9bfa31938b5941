#!/usr/bin/env bash
# Cash-out throughput against healthz throughput on the same server, same wrk settings, in
# one run (issue "Money out", speed). Needs wrk (apt-get install wrk), curl and python3.
#   cargo build --release && benches/wrk/run.sh
# Settings: CONNS (64), THREADS (2), DURATION (20s), PORT (18090), BIN (target/release/pixgw).
# WEBHOOKS=1 also runs `pixgw webhooks listen` (output discarded) and configures the Demo
# account's cash_out webhook to it, so every cash-out is delivered during the run.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/pixgw}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
DURATION=${DURATION:-20s}
PORT=${PORT:-18090}
BASE="http://127.0.0.1:$PORT"
dir=$(mktemp -d)
WEBHOOKS=${WEBHOOKS:-0}
PIXGW_WEBHOOK_ALLOW_HTTP=1 PIXGW_WEBHOOK_ALLOW_PRIVATE=1 \
  "$BIN" serve --data-dir "$dir" --listen "127.0.0.1:$PORT" >"$dir/server.out" 2>"$dir/server.err" &
pid=$!
lpid=""
trap 'kill $pid $lpid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf "$BASE/healthz" >/dev/null && break; sleep 0.1; done
demo="$dir/demo"
token=$(curl -sf -X POST "$BASE/api/auth/token" -H 'Content-Type: application/json' \
  -H "X-SSL-Client-Cert: $(cat "$demo/client-cert.urlencoded")" -d @"$demo/token-request.json" |
  sed -E 's/.*"access_token":"([^"]+)".*/\1/')
curl -sf -X POST "$BASE/sandbox/pix-in" -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json' -d '{"amount": 100000}' >/dev/null
if [ "$WEBHOOKS" = 1 ]; then
  "$BIN" webhooks listen --port $((PORT + 1)) >/dev/null &
  lpid=$!
  curl -sf -X POST "$BASE/api/webhooks" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d "{\"url\": \"http://127.0.0.1:$((PORT + 1))/hook\", \"eventType\": \"cash_out\"}" >/dev/null
  echo "== webhooks: every cash-out is delivered to pixgw webhooks listen on port $((PORT + 1))"
fi
read -r key doc < <(python3 -c 'import json; k=[k for k in json.load(open("data/dict.json"))["keys"] if k["keyType"]=="EMAIL"][0]; print(k["key"], k["document"])')

echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%FT%TZ)"
echo "== healthz: wrk -t$THREADS -c$CONNS -d$DURATION --latency $BASE/healthz"
wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency "$BASE/healthz"
echo "== cash-out: wrk -t$THREADS -c$CONNS -d$DURATION --latency -s benches/wrk/cash_out.lua $BASE -- TOKEN KEY DOC"
wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency -s benches/wrk/cash_out.lua "$BASE" -- "$token" "$key" "$doc"
echo "== balance after the run"
curl -sf "$BASE/api/balance" -H "Authorization: Bearer $token"; echo
echo "== server resident memory after the run: $(ps -o rss= -p "$pid") KiB"
echo "== webhooks so far: $(curl -sf "$BASE/metrics" | grep -E '^pixgw_webhooks_(delivered|retried|failed)_total' | tr '\n' ' ')"
