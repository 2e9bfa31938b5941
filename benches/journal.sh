#!/usr/bin/env bash
# The journal's goals on one server, in order (issue "The journal"):
#   1. open loop, mixed, RATE/s for OPEN_FOR on a fresh server (p99);
#   2. closed loop cash-outs for CLOSED_FOR (rate, p99), then the server's resident memory;
#   3. the same open loop again on the same server;
#   4. a second closed loop, killed with SIGKILL halfway, and the time until the restarted
#      server answers /healthz and a balance; the load tool then checks the books.
#   cargo build --release && benches/journal.sh
# Settings: BIN (target/release/pixgw), PORT (18097), RATE (340), OPEN_FOR (20s),
# CLOSED_FOR (60s). Needs curl.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/pixgw}
PORT=${PORT:-18097}
RATE=${RATE:-340}
OPEN_FOR=${OPEN_FOR:-20s}
CLOSED_FOR=${CLOSED_FOR:-60s}
BASE="http://127.0.0.1:$PORT"
dir=$(mktemp -d)
pid=""
trap 'kill -9 $pid 2>/dev/null || true; rm -rf "$dir"' EXIT
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
serve() {
  "$BIN" serve --data-dir "$dir" --listen "127.0.0.1:$PORT" >>"$dir/server.log" 2>&1 &
  pid=$!
  until curl -sf "$BASE/healthz" >/dev/null; do sleep 0.01; done
}
load() { "$BIN" load --url "$BASE" --data-dir "$dir" "$@"; }
summary() { grep -E 'requests/s|p50|p99|consistency|ok|FAIL' || true; }

echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%FT%TZ)"
serve
echo "== 1. open loop, mixed, $RATE/s, fresh server"
load --scenario mixed --rate "$RATE" --duration "$OPEN_FOR" | summary
echo "== 2. closed loop cash-outs, $CLOSED_FOR"
load --scenario cash-out --duration "$CLOSED_FOR" | summary
echo "== resident memory after it: $(ps -o rss= -p "$pid") KiB; journal on disk: $(du -sh "$dir/journal" | cut -f1); sled: $(du -sh "$dir/db" | cut -f1)"
echo "== 3. open loop, mixed, $RATE/s, same server"
load --scenario mixed --rate "$RATE" --duration "$OPEN_FOR" | summary
echo "== 4. closed loop cash-outs, SIGKILL after half of $CLOSED_FOR"
secs=${CLOSED_FOR%s}
load --scenario cash-out --duration "$CLOSED_FOR" >/dev/null 2>&1 &
lpid=$!
sleep $((secs / 2))
echo "   journal at the kill: $(du -sh "$dir/journal" | cut -f1)"
kill -9 "$pid"
wait "$lpid" 2>/dev/null || true
t0=$(now_ms)
serve
t1=$(now_ms)
demo="$dir/demo"
token=$(curl -sf -X POST "$BASE/api/auth/token" -H 'Content-Type: application/json' \
  -H "X-SSL-Client-Cert: $(cat "$demo/client-cert.urlencoded")" -d @"$demo/token-request.json" |
  sed -E 's/.*"access_token":"([^"]+)".*/\1/')
curl -sf "$BASE/api/balance" -H "Authorization: Bearer $token"; echo
t2=$(now_ms)
echo "== restart after the kill: /healthz after $((t1 - t0)) ms, a token and a balance after $((t2 - t0)) ms"
grep -E 'replayed the journal' "$dir/server.log" | tail -1 || true
kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
