#!/usr/bin/env bash
# Bytes on disk per cash-out: a release server on a fresh data dir takes a closed loop of
# cash-outs from `pixgw load` for DURATION, stops gracefully (its last checkpoint), and the
# sizes of sled (db/) and the journal are divided by the cash-outs it accepted
# (docs/deploy.md "Disk sizing").
#   benches/disk_per_payment.sh           # BIN=target/release/pixgw DURATION=20s
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/pixgw}
DURATION=${DURATION:-20s}
[ -x "$BIN" ] || cargo build --release -q
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$BIN" serve --data-dir "$d/run" --listen "127.0.0.1:$port" >"$d/out" 2>"$d/log" &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
"$BIN" load --url "http://127.0.0.1:$port" --data-dir "$d/run" --scenario cash-out --duration "$DURATION" \
  --json >"$d/load.json" 2>/dev/null || true
sleep 2
kill -TERM "$pid"
wait "$pid" || true
cash_outs=$(grep -c 'payment accepted' "$d/log" || true)
db=$(du -s --block-size=1 "$d/run/db" | cut -f1)
journal=$(du -s --block-size=1 "$d/run/journal" | cut -f1)
echo "cash-outs $cash_outs; sled $db B ($(( db / cash_outs )) B per cash-out); journal $journal B ($(ls "$d/run/journal" | wc -l) segments)"
echo "== $(date -u +%FT%TZ), $(nproc) cores, DURATION=$DURATION"
