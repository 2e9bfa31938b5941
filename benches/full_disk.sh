#!/usr/bin/env bash
# A full disk on a real small tmpfs (issue "The journal"): writes are refused with 503 and
# Retry-After, reads are served, the condition is logged once, and writes resume by
# themselves once room returns. Needs root (mount), curl.
#   cargo build --release && benches/full_disk.sh
# Settings: BIN (target/release/pixgw), PORT (18099), SIZE_MB (64).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${BIN:-target/release/pixgw}")
PORT=${PORT:-18099}
SIZE_MB=${SIZE_MB:-64}
BASE="http://127.0.0.1:$PORT"
mnt=$(mktemp -d)
log=$(mktemp)
mount -t tmpfs -o size="${SIZE_MB}m" tmpfs "$mnt"
dir="$mnt/run"
pid=""
cleanup() { kill -9 $pid 2>/dev/null || true; sleep 0.2; umount "$mnt" || true; rmdir "$mnt" || true; }
trap cleanup EXIT
RUST_LOG=info "$BIN" serve --data-dir "$dir" --listen "127.0.0.1:$PORT" --journal-segment-mb 4 \
  --storage-cache-mb 8 >"$log" 2>&1 &
pid=$!
until curl -sf "$BASE/healthz" >/dev/null; do sleep 0.05; done
demo="$dir/demo"
token=$(curl -sf -X POST "$BASE/api/auth/token" -H 'Content-Type: application/json' \
  -H "X-SSL-Client-Cert: $(cat "$demo/client-cert.urlencoded")" -d @"$demo/token-request.json" |
  sed -E 's/.*"access_token":"([^"]+)".*/\1/')
read -r key doc < <(python3 -c 'import json; k=[k for k in json.load(open("data/dict.json"))["keys"] if k["keyType"]=="EMAIL"][0]; print(k["key"], k["document"])')
cash_out() {
  curl -s -o /dev/null -D - -X POST "$BASE/api/pix/cash-out" -H "Authorization: Bearer $token" \
    -H 'Content-Type: application/json' \
    -d "{\"value\": 0.01, \"externalId\": \"$1\", \"details\": {\"key\": \"$key\", \"keyType\": \"EMAIL\", \"name\": \"Payee\", \"document\": \"$doc\"}}"
}
# Ballast: leave about 30 MiB free, so the disk soon fills (the journal refuses writes below
# 4 segments = 16 MiB free, which leaves sled room for its checkpoints).
free_kb=$(df -k --output=avail "$mnt" | tail -1)
dd if=/dev/zero of="$mnt/ballast" bs=1M count=$(( free_kb / 1024 - 30 )) status=none || true
echo "== $(df -h --output=size,used,avail "$mnt" | tail -1) after the ballast"
echo "== cash-outs until the disk is full (closed loop, 20 s)"
"$BIN" load --url "$BASE" --data-dir "$dir" --scenario cash-out --connections 16 --duration 20s \
  --warmup 0s 2>&1 | grep -E "requests in|non-2xx|accepted here|accepted twice" | tail -4 || true
echo "== a cash-out now: $(cash_out "full-1" | grep -iE "^HTTP|^retry-after" | tr -d '\r' | tr '\n' ' ')"
echo "== a read now: GET /api/balance -> $(curl -s -o /dev/null -w '%{http_code}' "$BASE/api/balance" -H "Authorization: Bearer $token")"
echo "== GET /healthz -> $(curl -s -o /dev/null -w '%{http_code}' "$BASE/healthz")"
echo "== lines in the log about it: $(grep -cE 'nearly full|cannot make a segment' "$log" || true)"
rm -f "$mnt/ballast"
echo "== ballast removed; waiting for the journal to make a segment again"
for i in $(seq 50); do
  status=$(cash_out "after-$i" | awk '/^HTTP/ {print $2}')
  [ "$status" = 201 ] && { echo "== a cash-out after $i tries (0.1 s apart): 201"; break; }
  sleep 0.1
done
echo "== $(grep -c 'writes resume' "$log" || true) 'writes resume' line(s) in the log"
# Settlements refused while the disk was full are written once room returns.
for _ in $(seq 100); do
  blocked=$(curl -sf "$BASE/api/balance" -H "Authorization: Bearer $token" | sed -E 's/.*"blockedBalance":([0-9.]+).*/\1/')
  [ "$blocked" = 0 ] || [ "$blocked" = 0.0 ] || [ "$blocked" = "0.00" ] && break
  sleep 0.1
done
echo "== blocked balance once room returned: $blocked"
echo "== ERROR and WARN lines of the server log:"; grep -E "ERROR|WARN" "$log" | sed -E "s/\x1b\[[0-9;]*m//g" | cut -c1-220 | head -8
rm -f "$log"
