#!/usr/bin/env bash
# Backup and restore of a store of about a million transactions, in clear and encrypted
# (docs/benchmarks.md): a fresh server takes cash-outs from the load tool for DURATION, is
# backed up twice each way while it serves, then each backup is restored and served, and the
# restored balance printed. Also times the age tool's own decryption of the encrypted one.
#   BIN=target/release/pixgw benches/backup.sh     (needs age, bc, python3)
set -euo pipefail
BIN=${BIN:-target/release/pixgw}
DURATION=${DURATION:-75s}
W=${WORK:-/tmp/pixgw-backup-bench}; rm -rf "$W"; mkdir -p "$W"
$BIN serve --data-dir $W/run --listen 127.0.0.1:18095 > $W/serve.log 2>&1 &
SERVE=$!
sleep 2
$BIN load --url http://127.0.0.1:18095 --data-dir $W/run --scenario cash-out --connections 64 --duration "$DURATION" > $W/load.log 2>&1 || true
tail -5 $W/load.log
ADMIN=$(python3 -c "import json;print(json.load(open('$W/run/demo/credentials.json'))['adminToken'])")
ACC=$(python3 -c "import json;print(json.load(open('$W/run/demo/credentials.json'))['accountId'])")
echo "data dir: $(du -sm $W/run | cut -f1) MB"
$BIN keygen backup --out $W/id.key > $W/keygen.out; REC=$(tail -1 $W/keygen.out)
t() { local s=$(date +%s.%N); "$@"; local e=$(date +%s.%N); echo "TIME $(echo "$e - $s" | bc) s: ${*:1:3}"; }
t $BIN backup --url http://127.0.0.1:18095 --admin-token "$ADMIN" --to $W/clear
t $BIN backup --url http://127.0.0.1:18095 --admin-token "$ADMIN" --encrypt-to "$REC" --to $W/enc
t $BIN backup --url http://127.0.0.1:18095 --admin-token "$ADMIN" --to $W/clear2
t $BIN backup --url http://127.0.0.1:18095 --admin-token "$ADMIN" --encrypt-to "$REC" --to $W/enc2
ls -l $W/clear $W/enc
kill $SERVE; wait $SERVE || true
t $BIN restore --from $W/clear --data-dir $W/rest-clear
t $BIN restore --from $W/enc --identity $W/id.key --data-dir $W/rest-enc
t age -d -i $W/id.key -o $W/dec.pixgw $W/enc/backup.pixgw.age
cmp $W/dec.pixgw $W/clear/backup.pixgw && echo "age -d gives a stream" || echo "(streams differ: taken at different moments)"
du -sm $W/rest-clear $W/rest-enc
for d in rest-clear rest-enc; do
  mkdir -p $W/$d/demo; cp $W/run/demo/* $W/$d/demo/
  $BIN serve --data-dir $W/$d --listen 127.0.0.1:18096 > $W/$d.log 2>&1 & P=$!; sleep 3
  python3 - "$W" <<'PY'
import json,sys,urllib.request,subprocess
W=sys.argv[1]
c=json.load(open(W+'/run/demo/credentials.json'))
cert=open(W+'/run/demo/client-cert.urlencoded').read().strip()
req=urllib.request.Request('http://127.0.0.1:18096/api/auth/token',data=json.dumps({'clientId':c['clientId'],'clientSecret':c['clientSecret']}).encode(),headers={'Content-Type':'application/json','X-SSL-Client-Cert':cert})
tok=json.load(urllib.request.urlopen(req))['access_token']
req=urllib.request.Request('http://127.0.0.1:18096/api/balance',headers={'Authorization':'Bearer '+tok,'X-SSL-Client-Cert':cert})
print('balance', urllib.request.urlopen(req).read().decode())
PY
  kill $P; wait $P || true
done
