#!/usr/bin/env bash
# The latency curve of two server builds, alternating, each run on a fresh server and data
# dir, measured by one load tool (issue 25: tails compared as pairs, since this machine's
# tail moves by a factor of two from one run to the next).
#   A=/tmp/pixgw-before B=target/release/pixgw benches/curve_pair.sh
# Settings: RATES (1000,3000,6000), DURATION (10s, per rate), PAIRS (2), PORT (18300),
# LOAD (the load tool's binary: B), HISTORY (unset; e.g. 60s: that long a closed loop of 64
# connections on each server before its curve, to see whether history moves it). Prints one
# JSON line per run (the curve's rows, with the server's own clock), then a table.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${A:?the first server build}
B=${B:?the second server build}
LOAD=${LOAD:-$B}
RATES=${RATES:-1000,3000,6000}
DURATION=${DURATION:-10s}
PAIRS=${PAIRS:-2}
PORT=${PORT:-18300}
out=$(mktemp)
HISTORY=${HISTORY:-}
echo "== machine: $(nproc) cores; $(date -u +%FT%TZ); rates $RATES, $DURATION each, $PAIRS pairs${HISTORY:+, after $HISTORY of closed loop}" >&2
run() { # label binary
  local dir pid
  dir=$(mktemp -d)
  "$2" serve --data-dir "$dir" --listen "127.0.0.1:$PORT" >"$dir/server.out" 2>"$dir/server.err" &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
  if [ -n "$HISTORY" ]; then
    "$LOAD" load --url "http://127.0.0.1:$PORT" --data-dir "$dir" --connections 64 --duration "$HISTORY" \
      --fund 100000000 2>&1 | grep -E "requests/s" >&2
  fi
  "$LOAD" load --url "http://127.0.0.1:$PORT" --data-dir "$dir" --rates "$RATES" --duration "$DURATION" \
    --fund 10000000 --json 2>/dev/null |
    python3 -c 'import json,sys; v=json.load(sys.stdin); print(json.dumps({"build": sys.argv[1], "ok": v["consistency"]["ok"], "rows": v["curve"]["rates"]}))' "$1" | tee -a "$out"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
for i in $(seq "$PAIRS"); do
  if [ $((i % 2)) = 1 ]; then run A "$A"; run B "$B"; else run B "$B"; run A "$A"; fi
done
python3 - "$out" <<'PY'
import json, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
print("| build | rate/s | client-side p50 | p99 | p99.9 | server clock p99 | server within 2 ms | within 5 ms | consistent |")
print("|---|---|---|---|---|---|---|---|---|")
for r in runs:
    for row in r["rows"]:
        s, c = row["serverMs"], row.get("serverClock") or {}
        w = c.get("within", {})
        pct = lambda x: "-" if x is None else f"{x*100:.2f} %"
        print(f'| {r["build"]} | {row["rate"]:.0f} | {s["p50"]:.2f} | {s["p99"]:.2f} | {s["p999"]:.2f} | '
              f'<= {c.get("p99AtMostMs")} | {pct(w.get("2"))} | {pct(w.get("5"))} | {r["ok"]} |')
PY
rm -f "$out"
