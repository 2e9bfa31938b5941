#!/usr/bin/env bash
# The checkpoint's time per cash-out (pixgw_checkpoint_seconds_sum, less its pauses, over the
# cash-outs of an open-loop run), on a fresh server or after HISTORY of closed loop (64 connections), for
# each of the given builds in turn, PAIRS times (issue 25).
#   BINS="/tmp/pixgw-before target/release/pixgw" HISTORY=60s benches/checkpoint_cost.sh
# Settings: BINS (the builds, in the order of each round), RATE (6000), DURATION (20s),
# HISTORY (unset: fresh), PAIRS (2), PORT (18310). Prints one line per run.
set -euo pipefail
cd "$(dirname "$0")/.."
BINS=${BINS:?the server builds, space separated}
RATE=${RATE:-6000}
DURATION=${DURATION:-20s}
HISTORY=${HISTORY:-}
PAIRS=${PAIRS:-2}
PORT=${PORT:-18310}
echo "== machine: $(nproc) cores; $(date -u +%FT%TZ); $RATE/s for $DURATION${HISTORY:+ after $HISTORY of closed loop}; $PAIRS rounds" >&2
# The checkpoints' time less their pauses (builds before the pauses have no such metric).
checkpoint_sum() {
  curl -sf "http://127.0.0.1:$PORT/metrics" |
    awk '$1 == "pixgw_checkpoint_seconds_sum" { t = $2 } $1 == "pixgw_checkpoint_paused_seconds_sum" { p = $2 }
         END { print t - p }'
}
for _ in $(seq "$PAIRS"); do
  for bin in $BINS; do
    dir=$(mktemp -d)
    "$bin" serve --data-dir "$dir" --listen "127.0.0.1:$PORT" >"$dir/server.out" 2>"$dir/server.err" &
    pid=$!
    for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
    if [ -n "$HISTORY" ]; then
      "$bin" load --url "http://127.0.0.1:$PORT" --data-dir "$dir" --connections 64 --duration "$HISTORY" \
        --fund 100000000 >/dev/null 2>&1
    fi
    before=$(checkpoint_sum)
    summary=$("$bin" load --url "http://127.0.0.1:$PORT" --data-dir "$dir" --rate "$RATE" --duration "$DURATION" \
      --fund 10000000 --json 2>/dev/null)
    # Two checkpoint periods, so the run's last writes are in the sum.
    sleep 2.5
    after=$(checkpoint_sum)
    python3 -c '
import json, sys
v = json.loads(sys.argv[1]); n = v["requests"]; spent = float(sys.argv[3]) - float(sys.argv[2])
s = v["serviceMs"]; p50, p99, p999, ok = s["p50"], s["p99"], s["p999"], v["consistency"]["ok"]
print(f"{sys.argv[4]}: {n} cash-outs, checkpoint {spent:.2f} s = {spent / n * 1e6:.1f} us per cash-out; "
      f"server p50 {p50:.2f} p99 {p99:.2f} p99.9 {p999:.2f} ms; consistent {ok}")
' "$summary" "$before" "$after" "$bin"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
  done
done
