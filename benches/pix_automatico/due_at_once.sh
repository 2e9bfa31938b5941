#!/usr/bin/env bash
# N recurring charges of one account due at the same instant (issue 26): how long the
# account's actor takes to settle them all, and how a read through the same actor waits
# meanwhile. Needs python3.
#   cargo build --release && benches/pix_automatico/due_at_once.sh      # N=2000
#   ON_US=1 benches/pix_automatico/due_at_once.sh   # the payer is a second account (on us)
# Settings: N (2000), PORT (18091), BIN (target/release/pixgw), ON_US (0).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/pixgw}
export N=${N:-2000}
export PORT=${PORT:-18091}
dir=$(mktemp -d)
"$BIN" serve --data-dir "$dir" --listen "127.0.0.1:$PORT" --test-clock >"$dir/server.out" 2>"$dir/server.err" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
if [ "${ON_US:-0}" = 1 ]; then
  admin=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["adminToken"])' "$dir/demo/credentials.json")
  "$BIN" account create --url "http://127.0.0.1:$PORT" --admin-token "$admin" --name "Payer" \
    --document 52998224725 --sandbox --initial-balance 100000000 --out "$dir/payer" >/dev/null
  export ON_US PAYER="$dir/payer"
fi
DEMO="$dir/demo" python3 benches/pix_automatico/due_at_once.py
