#!/usr/bin/env bash
# Two nodes on PostgreSQL behind nginx (docs/deploy.md "Two nodes on PostgreSQL"), end to
# end: a throwaway PostgreSQL cluster, two pixgw nodes on it, nginx routing to whichever
# answers. Checks: a token, funding and cash-outs through nginx whichever node leads; kill
# -9 of the leader, then cash-outs through nginx again within 10 s, every refusal meanwhile a
# 503 with Retry-After (never nginx's 502), with nothing lost; the
# killed node started again serves as the standby; the balance through nginx is exact.
#   .ci/two-nodes.sh            # BIN (target/debug/pixgw); installs nginx-light and postgresql if absent
# Skips, saying why, where nginx or PostgreSQL can be neither found nor installed.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh
BIN=${BIN:-$(debug_binary)}
need_nginx
need_tools python3 curl
if ! ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1; then
  if ! apt_install postgresql; then
    [ "${CI:-}" = true ] && { echo "FAIL: PostgreSQL is required under CI and could not be installed" >&2; exit 1; }
    echo "SKIPPED: PostgreSQL is not installed and could not be installed here"
    exit 0
  fi
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
PIXGW=$BIN
. benches/pg/lib.sh
dir=$(mktemp -d)
chmod 755 "$dir"
npid=""
cleanup() {
  [ -n "$npid" ] && kill "$npid" 2>/dev/null
  for n in a b; do [ -f "$dir/$n/pid" ] && kill -9 "$(cat "$dir/$n/pid")" 2>/dev/null; done
  pg_down "$dir/pg" immediate
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fail() { echo "FAIL: $*" >&2; for n in a b; do tail -5 "$dir/$n/stderr" >&2 2>/dev/null || true; done; exit 1; }

pgport=$(free_port)
pg_new "$dir/pg" "$pgport"
psql_at "$pgport" postgres "CREATE DATABASE pixgw"
url="postgres://postgres@127.0.0.1:$pgport/pixgw"
port_a=$(free_port) port_b=$(free_port)
base_a=$(node_start "$dir/a" "$url" "127.0.0.1:$port_a")
wait_role "$base_a" leader 30 >/dev/null || fail "node a never led"
base_b=$(node_start "$dir/b" "$url" "127.0.0.1:$port_b")
wait_role "$base_b" standby 10 >/dev/null || fail "node b is not a standby"
echo "ok   node a leads, node b stands by"

nport=$(free_port)
sed -e "s|@PORT1@|$port_a|; s|@PORT2@|$port_b|; s|@NGINX_PORT@|$nport|; s|@DIR@|$dir|g" \
  .ci/nginx-two-nodes.conf >"$dir/nginx.conf"
"$NGINX" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' 2>"$dir/nginx.err" &
npid=$!
front="http://127.0.0.1:$nport"
for _ in $(seq 100); do curl -s -o /dev/null "$front/healthz" && break; sleep 0.1; done

demo="$dir/a/demo"
cert=$(cat "$demo/client-cert.urlencoded")
token=$(curl -s -X POST "$front/api/auth/token" -H 'Content-Type: application/json' \
  -H "X-SSL-Client-Cert: $cert" -d @"$demo/token-request.json" |
  python3 -c 'import json,sys; print(json.load(sys.stdin).get("access_token", ""))')
[ -n "$token" ] || fail "no token through nginx"
call() { # METHOD PATH [BODY] -> status, body in $dir/last.json
  curl -s -o "$dir/last.json" -D "$dir/last.headers" -w '%{http_code}' -X "$1" "$front$2" -H "Authorization: Bearer $token" \
    -H "X-SSL-Client-Cert: $cert" -H 'Content-Type: application/json' ${3:+-d "$3"}
}
code=$(call POST /sandbox/pix-in '{"amount": 100}')
[ "$code" = 201 ] || fail "funding through nginx: $code $(cat "$dir/last.json")"
read -r key doc < <(python3 -c 'import json; k=[k for k in json.load(open("data/dict.json"))["keys"] if k["keyType"]=="EMAIL"][0]; print(k["key"], k["document"])')
cash_out() { call POST /api/pix/cash-out "$(printf '{"value": 1, "externalId": "%s", "details": {"key": "%s", "keyType": "EMAIL", "name": "P", "document": "%s"}}' "$1" "$key" "$doc")"; }
for i in $(seq 1 10); do
  code=$(cash_out "before-$i")
  [ "$code" = 201 ] || fail "cash-out before-$i through nginx: $code $(cat "$dir/last.json")"
done
echo "ok   a token, funding and 10 cash-outs through nginx (leader first in the upstream)"

# The leader dies; nginx finds the new one as soon as it takes over.
kill -9 "$(cat "$dir/a/pid")"
killed=$(date +%s%N)
n=0
while :; do
  code=$(cash_out "during-$n")
  [ "$code" = 201 ] && break
  [ "$code" = 503 ] || fail "during the failover nginx answered $code $(cat "$dir/last.json")"
  grep -qi '^retry-after:' "$dir/last.headers" || fail "a 503 during the failover without Retry-After: $(cat "$dir/last.headers")"
  (( $(date +%s%N) - killed > 10000000000 )) && fail "no cash-out through nginx 10 s after the leader died"
  n=$((n + 1))
  sleep 0.2
done
echo "ok   kill -9 of the leader: a cash-out through nginx again after $(seconds_since "$killed") s"

# The killed node comes back as the standby; the new leader is second in the upstream now.
base_a=$(node_start "$dir/a" "$url" "127.0.0.1:$port_a")
wait_role "$base_a" standby 10 >/dev/null || fail "node a did not come back as the standby"
for i in $(seq 1 10); do
  code=$(cash_out "after-$i")
  [ "$code" = 201 ] || fail "cash-out after-$i through nginx: $code $(cat "$dir/last.json")"
done
echo "ok   node a back as the standby; 10 more cash-outs through nginx (past the standby)"

# Nothing lost, nothing twice: 21 cash-outs of 1.00 once they settle. The refused tries
# during the failover were refused by standbys, which never act on a request.
for _ in $(seq 100); do
  code=$(call GET /api/balance)
  [ "$code" = 200 ] || fail "balance through nginx: $code"
  python3 -c 'import json,sys; b=json.load(open(sys.argv[1]), parse_float=str); sys.exit(0 if str(b["blockedBalance"]) in ("0", "0.0", "0.00") else 1)' "$dir/last.json" && break
  sleep 0.1
done
net=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]), parse_float=str)["netBalance"])' "$dir/last.json")
[ "$net" = "79.00" ] || fail "balance after 21 cash-outs of 1.00 from 100.00: $net ($(cat "$dir/last.json"))"
echo "ok   the balance through nginx is exact: 79.00"
echo "two nodes on PostgreSQL behind nginx: all checks passed"
