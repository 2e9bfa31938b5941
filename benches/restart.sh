#!/usr/bin/env bash
# How long a server takes to start on a data dir until it serves (GET /healthz 200, then a
# balance of the Demo account): the restart goal of the issue "The load tool".
#   benches/restart.sh DATA_DIR        # e.g. the one `cargo bench --bench accounts` prints
# Settings: BIN (target/release/pixgw), PORT (18095). Needs curl.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:?usage: benches/restart.sh DATA_DIR}
BIN=${BIN:-target/release/pixgw}
PORT=${PORT:-18095}
BASE="http://127.0.0.1:$PORT"
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }
serve() {
  "$BIN" serve --data-dir "$DIR" --listen "127.0.0.1:$PORT" >/dev/null 2>&1 &
  pid=$!
  until curl -sf "$BASE/healthz" >/dev/null; do sleep 0.01; done
}
stop() { kill -TERM "$pid"; wait "$pid" 2>/dev/null || true; }
trap 'kill $pid 2>/dev/null || true' EXIT
# A first start may bootstrap (the Demo account, keys); the restart is the second one.
serve; stop
t0=$(now_ms)
serve
t1=$(now_ms)
demo="$DIR/demo"
token=$(curl -sf -X POST "$BASE/api/auth/token" -H 'Content-Type: application/json' \
  -H "X-SSL-Client-Cert: $(cat "$demo/client-cert.urlencoded")" -d @"$demo/token-request.json" |
  sed -E 's/.*"access_token":"([^"]+)".*/\1/')
curl -sf "$BASE/api/balance" -H "Authorization: Bearer $token" >/dev/null
t2=$(now_ms)
echo "== machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%FT%TZ); data dir $(du -sh "$DIR" | cut -f1)"
echo "restart: healthz 200 after $((t1 - t0)) ms; a token and a balance after $((t2 - t0)) ms"
echo "resident memory after: $(ps -o rss= -p "$pid") KiB"
stop
