#!/usr/bin/env bash
# The central bank's capacity test, in its shape, through `pixgw spi-sim` on this machine:
# N transactions in DURATION seconds, half sent by pixgw (cash-outs of one live account to
# keys of the simulated directory, whose banks accept every payment) and half received (the
# simulator's payer pays a second live account by its registered key), both at once, each
# an open loop at its own steady rate. The homologation asks 20,000 in 10 minutes; the
# defaults ask the same 20,000 in 60 s.
#
# It prints, and writes to $OUT/result.json:
#   - the wall time and whether every payment settled, with no SPI timeout (AB03);
#   - the time real receivers (pixgw) took to answer a pacs.008 (from when the SPI made it
#     available to when its pacs.002 arrived): p50, p99, max;
#   - pixgw's CPU time per transaction (user + system, from /proc), beside the floor of one
#     RSA-2048 signature (`openssl speed rsa2048`);
#   - the schema check of every message either side wrote (xmllint, data/spi/xsd).
#   - ledger against settlement: pixgw's two accounts, and the reconciliation read's net,
#     against the simulator's account of participant 1234ABCD.
#
#   BIN=target/release/pixgw benches/spi/homologation.sh          # N=20000 DURATION=60
#   N=2000 DURATION=20 benches/spi/homologation.sh
#   KILLS=30 benches/spi/homologation.sh   # kill -9 pixgw 30 times during the run
#   FAULTS=1 benches/spi/homologation.sh   # every ICOM fault at a steady rate (below)
#
# FAULTS=1 makes spi-sim play, during the run: posts answered 408, 429 or 500, or stored
# and then dropped; reads answered 408, 429 or 500, or delivered and lost (given again once
# the stream expires); messages delivered twice; statuses held back 45 s (past the SPI's
# 40 s); an outage of ICOM (sends and reads) of 3 s at a third of the run; an unexpected
# pacs.002 and admi.002 every 2 s (each must become one unmatched item, nothing else); and
# a second reader: a restored copy of pixgw's store started beside it with the same
# settings, which must hold its rail and read nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-target/release/pixgw}
N=${N:-20000}
DURATION=${DURATION:-60}
KILLS=${KILLS:-0}
FAULTS=${FAULTS:-0}
VALUE=${VALUE:-1.00}
OUT=${OUT:-$(mktemp -d /tmp/pixgw-homologation.XXXXXX)}
ISPB=1234ABCD
half=$((N / 2))
rate=$(python3 -c "print($half / $DURATION)")
mkdir -p "$OUT"
echo "== $N transactions ($half sent, $half received) in ${DURATION}s at $rate/s each way; work in $OUT"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT

# A stream left unread for 5 s is given up and its last delivery given again (a killed
# pixgw's streams block new ones: six at most per participant).
"$BIN" spi-sim --dir "$OUT/sim" --spool "$OUT/spool" --participant "$ISPB" --timeout-ms 30000 --stream-idle-ms 5000 \
  >"$OUT/sim.out" 2>"$OUT/sim.err" &
sim_pid=$!
pids+=("$sim_pid")
for _ in $(seq 100); do [ -s "$OUT/sim.out" ] && grep -q settings "$OUT/sim.out" && break; sleep 0.1; done
control=$(sed -n 's/.* control \(http[^ ]*\).*/\1/p' "$OUT/sim.out")
config="$OUT/sim/pixgw-spi.toml"

token=$(python3 -c 'import secrets; print(secrets.token_hex(24))')
start_pixgw() {
  PIXGW_ADMIN_TOKEN="$token" RUST_LOG=warn "$BIN" serve --config "$config" --data-dir "$OUT/data" \
    --listen "127.0.0.1:${PORT:-0}" >"$OUT/pixgw.out" 2>>"$OUT/pixgw.err" &
  pixgw_pid=$!
  for _ in $(seq 200); do grep -q "listening on" "$OUT/pixgw.out" 2>/dev/null && break; sleep 0.05; done
  base=$(sed -n 's/^pixgw listening on \(.*\)$/\1/p' "$OUT/pixgw.out" | head -1)
}
start_pixgw
pids+=("$pixgw_pid")
PORT=${base##*:}
echo "   simulator control $control; pixgw $base (pid $pixgw_pid)"

admin() { curl -sf -X "$1" "$base$2" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' ${3:+-d "$3"}; }
make_account() {
  PIXGW_ADMIN_TOKEN="$token" "$BIN" account create --url "$base" --name "$1" --document 11222333000181 \
    --out "$OUT/$1" >/dev/null
  python3 -c "import json,sys; print(json.load(open('$OUT/$1/credentials.json'))['accountId'])"
}
payer=$(make_account payer)
payee=$(make_account payee)
key=$(admin POST "/admin/accounts/$payee/keys" '{"keyType": "EVP"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
echo "   payer account $payer; payee account $payee, key $key"

# An account's gross balance (available + blocked), through its own token.
gross() {
  local t
  t=$(curl -s "$base/api/auth/token" -H 'Content-Type: application/json' \
    -H "X-SSL-Client-Cert: $(cat "$OUT/$1/client-cert.urlencoded")" -d @"$OUT/$1/token-request.json" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
  curl -s "$base/api/balance" -H "Authorization: Bearer $t" | python3 -c 'import json,sys,decimal; print(json.load(sys.stdin, parse_float=decimal.Decimal)["grossBalance"])'
}
settlement() {
  curl -s "$control/sim/participants" | python3 -c "
import json,sys
print([x for x in json.load(sys.stdin)['participants'] if x['ispb']=='$ISPB'][0]['balanceCents'])"
}
settlement_before=$(settlement)

# The payer is funded through the SPI like any account: the simulator pays it by number.
fund=$(python3 -c "from decimal import Decimal as D; print(D('$half') * D('$VALUE') + D('10.00'))")
curl -sf "$control/sim/pix" -H 'Content-Type: application/json' \
  -d "{\"toAccount\": {\"ispb\": \"$ISPB\", \"number\": \"$payer\", \"document\": \"11222333000181\"}, \"amount\": \"$fund\"}" >/dev/null
for _ in $(seq 200); do
  [ "$(gross payer)" = "$fund" ] && break
  sleep 0.1
done
echo "   payer funded with $fund"

injected=0
if [ "$FAULTS" -gt 0 ]; then
  curl -sf -X PUT "$control/sim/faults" -H 'Content-Type: application/json' -d '{"every": {
    "post408": 200, "post429": 300, "post500": 250, "postReset": 200,
    "read408": 300, "read429": 400, "read500": 250, "readDropped": 300,
    "duplicate": 200, "lateStatus": 500, "lateMs": 45000}}' >/dev/null
  # The second reader: a restored copy of this store, with the same settings.
  PIXGW_ADMIN_TOKEN="$token" "$BIN" backup --url "$base" --to "$OUT/backup" >/dev/null
  "$BIN" restore --from "$OUT/backup" --data-dir "$OUT/copy" >/dev/null
  PIXGW_ADMIN_TOKEN="$token" RUST_LOG=warn "$BIN" serve --config "$config" --data-dir "$OUT/copy" \
    --listen 127.0.0.1:0 >"$OUT/copy.out" 2>"$OUT/copy.err" &
  copy_pid=$!
  pids+=("$copy_pid")
  for _ in $(seq 200); do grep -q "listening on" "$OUT/copy.out" 2>/dev/null && break; sleep 0.05; done
  copy_base=$(sed -n 's/^pixgw listening on \(.*\)$/\1/p' "$OUT/copy.out" | head -1)
  echo "   faults on; a restored copy reads beside pixgw at $copy_base"
  (
    # An outage of ICOM at a third of the run.
    sleep "$(python3 -c "print($DURATION / 3)")"
    curl -sf -X PUT "$control/sim/icom" -H 'Content-Type: application/json' -d '{"sends": true, "reads": true}' >/dev/null
    sleep 3
    curl -sf -X PUT "$control/sim/icom" -H 'Content-Type: application/json' -d '{}' >/dev/null
  ) &
  pids+=("$!")
  (
    # Messages of no payment of ours, every 2 s: one pacs.002 and one admi.002.
    i=0
    while [ "$i" -lt "$((DURATION / 2))" ]; do
      id=$(python3 -c 'import secrets,string; print("E99999A03" + "202611281200" + "".join(secrets.choice(string.ascii_letters) for _ in range(11)))')
      curl -sf "$control/sim/inject" -H 'Content-Type: application/json' -d "{\"pacs002\": {\"endToEndId\": \"$id\", \"status\": \"ACSC\"}}" >/dev/null
      curl -sf "$control/sim/inject" -H 'Content-Type: application/json' -d "{\"admi002\": {\"reference\": \"M$id\", \"reason\": \"CH16\"}}" >/dev/null
      i=$((i + 1))
      sleep 2
    done
  ) &
  injector=$!
  injected=$((DURATION / 2 * 2))
fi

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
hz=$(getconf CLK_TCK)
cpu_before=$(cpu_ticks "$pixgw_pid")
sim_cpu_before=$(cpu_ticks "$sim_pid")
t0=$(date +%s.%N)

# Both directions at once.
curl -sf "$control/sim/load" -H 'Content-Type: application/json' \
  -d "{\"to\": \"$key\", \"count\": $half, \"perSecond\": $rate, \"amount\": \"$VALUE\"}" >/dev/null
"$BIN" load --url "$base" --client-id="$(python3 -c "import json; print(json.load(open('$OUT/payer/credentials.json'))['clientId'])")" \
  --client-secret="$(python3 -c "import json; print(json.load(open('$OUT/payer/credentials.json'))['clientSecret'])")" \
  --cert "$OUT/payer/client-cert.pem" --scenario cash-out --rate "$rate" --requests "$half" \
  --duration "$((DURATION * 3))s" --warmup 0s --fund 0 --value "$VALUE" --connections 64 --json >"$OUT/load.json" 2>"$OUT/load.err" &
load_pid=$!

cpu_spent=0
if [ "$KILLS" -gt 0 ]; then
  # kill -9 pixgw KILLS times, evenly over the run, starting it again each time.
  gap=$(python3 -c "print($DURATION / ($KILLS + 1))")
  for i in $(seq "$KILLS"); do
    sleep "$gap"
    cpu_spent=$((cpu_spent + $(cpu_ticks "$pixgw_pid") - cpu_before))
    kill -9 "$pixgw_pid"; wait "$pixgw_pid" 2>/dev/null || true
    : >"$OUT/pixgw.out"
    start_pixgw
    pids+=("$pixgw_pid")
    cpu_before=$(cpu_ticks "$pixgw_pid")
  done
fi
wait "$load_pid" || true

# Until every payment of both directions settled (or 120 s).
for _ in $(seq 1200); do
  done_=$(curl -s "$control/sim/participants" | python3 -c "
import json,sys
p=[x for x in json.load(sys.stdin)['participants'] if x['ispb']=='$ISPB'][0]
print(p['paid'] + p['received'])")
  [ "$done_" -ge "$((N + 1))" ] && break
  sleep 0.1
done
# Until pixgw has no payout waiting for its status and no accepted arrival waiting for its
# settlement (statuses held back arrive 45 s late; at most 120 s more).
window() {
  python3 -c "import datetime as d; n = d.datetime.now(d.timezone.utc); f = '%Y-%m-%dT%H:%M:%SZ'; print(f'from={(n - d.timedelta(hours=1)).strftime(f)}&to={(n + d.timedelta(hours=1)).strftime(f)}')"
}
for _ in $(seq 1200); do
  pending=$(admin GET "/admin/rail/reconciliation?$(window)" |
    python3 -c 'import json,sys; r = json.load(sys.stdin); print(r["payoutsPending"]["count"] + r["arrivalsAccepted"]["count"])' 2>/dev/null || echo "?")
  [ "$pending" = 0 ] && break
  sleep 0.1
done
[ "$FAULTS" -gt 0 ] && wait "$injector"
t1=$(date +%s.%N)
cpu_spent=$((cpu_spent + $(cpu_ticks "$pixgw_pid") - cpu_before))
sim_cpu=$(( $(cpu_ticks "$sim_pid") - sim_cpu_before ))
curl -s "$control/sim/stats" >"$OUT/sim-stats.json"
# Ledger against settlement: what the two accounts hold is what the participant's
# settlement account gained (every fee is 0 here).
ledger=$(python3 -c "from decimal import Decimal as D; print(D('$(gross payer)') + D('$(gross payee)'))")
settled=$(python3 -c "from decimal import Decimal as D; print((D('$(settlement)') - D('$settlement_before')) / 100)")
# The reconciliation read over the whole run: the ledger's net for the settlement account.
from=$(python3 -c "import datetime; print((datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(hours=1)).strftime('%Y-%m-%dT%H:%M:%SZ'))")
to=$(python3 -c "import datetime; print((datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).strftime('%Y-%m-%dT%H:%M:%SZ'))")
admin GET "/admin/rail/reconciliation?from=$from&to=$to" >"$OUT/reconciliation.json"
reconciled=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["net"])' "$OUT/reconciliation.json")
copy_read=-
if [ "$FAULTS" -gt 0 ]; then
  # The restored copy: its rail held, nothing read.
  copy_read=$(curl -s "$copy_base/metrics" | python3 -c '
import sys
held = read = 0
for line in sys.stdin:
    if line.startswith("pixgw_spi_rail_held "): held = float(line.split()[1])
    if line.startswith("pixgw_spi_messages_received_total"): read += float(line.split()[1])
print(f"held={int(held)} read={int(read)}")')
fi
echo "   ledger (both accounts) $ledger; reconciliation net $reconciled; settlement account moved $settled"
echo "{\"ledger\": \"$ledger\", \"reconciliation\": \"$reconciled\", \"settlement\": \"$settled\"}" >"$OUT/books.json"
curl -s "$control/sim/participants" >"$OUT/participants.json"
rsa=$(openssl speed -seconds 2 rsa2048 2>/dev/null | awk '/^rsa +2048 bits/ {sub("s", "", $4); print $4 * 1000}')

python3 - "$OUT" "$N" "$t0" "$t1" "$cpu_spent" "$sim_cpu" "$hz" "${rsa:-0}" "$ISPB" "$KILLS" "$injected" "$copy_read" <<'EOF'
import json, sys
out, n, t0, t1, cpu, sim_cpu, hz, rsa_ms, ispb, kills, injected, copy_read = sys.argv[1:]
n, hz = int(n), int(hz)
stats = json.load(open(f"{out}/sim-stats.json"))
parts = json.load(open(f"{out}/participants.json"))["participants"]
ours = [p for p in parts if p["ispb"] == ispb][0]
load = json.load(open(f"{out}/load.json")) if open(f"{out}/load.json").read().strip() else {}
a = stats["answers"]
wall = float(t1) - float(t0)
result = {
    "transactions": n,
    "kills": int(kills),
    "wall_seconds": round(wall, 1),
    "settled_by_spi": ours["paid"] + ours["received"] - 1,
    "spi_timeouts": a["timeouts"],
    "answer_ms": {"p50": a["p50Ms"], "p99": a["p99Ms"], "max": a["maxMs"], "count": a["count"]},
    # The answers to payments no fault or outage fell within while they waited.
    "answer_ms_clean": {"p99": a["cleanP99Ms"], "max": a["cleanMaxMs"], "count": a["cleanCount"]},
    "pixgw_cpu_ms_per_tx": round(int(cpu) * 1000 / hz / n, 3),
    "spi_sim_cpu_ms_per_tx": round(int(sim_cpu) * 1000 / hz / n, 3),
    "rsa2048_sign_ms": float(rsa_ms),
    "sim_stats": {k: v for k, v in stats.items() if k != "answers"},
    "load_consistency": load.get("consistency", {}).get("ok"),
    "books": json.load(open(f"{out}/books.json")),
}
rec = json.load(open(f"{out}/reconciliation.json"))
result["payouts_pending_after"] = rec["payoutsPending"]["count"]
result["arrivals_waiting_after"] = rec["arrivalsAccepted"]["count"]
result["payouts_aged"] = len(rec["payoutsAged"])
result["unmatched"] = len(rec["unmatched"])
result["unexpected_injected"] = int(injected)
result["restored_copy"] = copy_read
json.dump(result, open(f"{out}/result.json", "w"), indent=2)
print(json.dumps(result, indent=2))
EOF

echo "== schema check of every message written (xmllint, data/spi/xsd)"
xsd=$(pwd)/data/spi/xsd
for kind in pacs.008:pacs.008.spi.1.16 pacs.002:pacs.002.spi.1.17 pacs.004:pacs.004.spi.1.5; do
  name=${kind%%:*}; file=${kind#*:}
  ver=${file##*.spi.}
  cat >"$OUT/$name.xsd" <<XSD
<xs:schema xmlns:xs="http://www.w3.org/2001/XMLSchema"><xs:import namespace="https://www.bcb.gov.br/pi/$name/$ver" schemaLocation="$xsd/$file.xsd"/><xs:import namespace="http://www.w3.org/2000/09/xmldsig#" schemaLocation="$xsd/xmldsig-core-schema.xsd"/></xs:schema>
XSD
  (find "$OUT/spool" -name '*.xml' -print0 | xargs -0 grep -l "bcb.gov.br/pi/$name/" || true) >"$OUT/$name.list"
  files=$(wc -l <"$OUT/$name.list")
  bad=0
  if [ "$files" -gt 0 ]; then
    xargs -n 2000 xmllint --noout --nonet --schema "$OUT/$name.xsd" <"$OUT/$name.list" \
      2>"$OUT/xmllint-$name.err" >/dev/null || bad=$(grep -c "fails to validate" "$OUT/xmllint-$name.err" || true)
  fi
  echo "   $name: $files messages, $bad invalid"
done
echo "   (admi.002 has no published schema; pixgw writes none)"
