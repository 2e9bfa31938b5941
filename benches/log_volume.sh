#!/usr/bin/env bash
# What the log costs: a release server logs to a file while `pixgw load` runs a closed loop
# of cash-outs for DURATION; then lines and bytes per accepted cash-out, for each
# --access-log mode and log format (docs/deploy.md "Logs" records the figures).
#   benches/log_volume.sh                 # BIN=target/release/pixgw DURATION=5s
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-target/release/pixgw}
DURATION=${DURATION:-5s}
[ -x "$BIN" ] || cargo build --release -q
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
printf '%-7s %-6s %10s %8s %12s %10s %10s %9s\n' access format cash-outs lines bytes lines/co bytes/co gzip/co
for mode in errors all; do
  for fmt in human json; do
    d=$(mktemp -d)
    port=$(free_port)
    PIXGW_ACCESS_LOG=$mode PIXGW_LOG_FORMAT=$fmt RUST_LOG=info "$BIN" serve --data-dir "$d/run" \
      --listen "127.0.0.1:$port" >"$d/out" 2>"$d/log" &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
    "$BIN" load --url "http://127.0.0.1:$port" --data-dir "$d/run" --scenario cash-out \
      --duration "$DURATION" --json >"$d/load.json" 2>/dev/null || true
    # Let the last cash-outs settle, then stop (the last lines are written at exit).
    sleep 2
    kill -TERM "$pid"
    wait "$pid" || true
    cash_outs=$(grep -c 'payment accepted' "$d/log" || true)
    lines=$(wc -l <"$d/log")
    bytes=$(wc -c <"$d/log")
    gz=$(gzip -c "$d/log" | wc -c)
    awk -v m="$mode" -v f="$fmt" -v c="$cash_outs" -v l="$lines" -v b="$bytes" -v g="$gz" 'BEGIN {
      printf "%-7s %-6s %10d %8d %12d %10.2f %10.0f %9.0f\n", m, f, c, l, b, l / c, b / c, g / c }'
    rm -rf "$d"
  done
done
echo "== $(date -u +%FT%TZ), $(nproc) cores, DURATION=$DURATION"
