#!/usr/bin/env bash
# The TLS front of docs/deploy.md, end to end with a real nginx running the document's own
# block: a throwaway CA signs a
# server and a client certificate; nginx terminates mutual TLS and forwards the client's
# certificate in X-SSL-Client-Cert (overwriting any the client sent); pixgw listens on
# loopback with the production profile of docs/deploy.md's unit (--production
# --require-client-cert, the admin token in an owner-only file), and the account is made
# with `pixgw account create --cert` for the CA's client certificate. Checks: no Demo
# account; a token and a cash-out through nginx; no sandbox route for any account; a
# client-sent X-SSL-Client-Cert is overwritten; no client certificate, no TLS session; and
# a direct request to pixgw with the token but without the bound certificate is 401; and a
# client's flood is answered 429 by nginx's limit_req.
#   .ci/nginx-front.sh            # BIN (target/debug/pixgw); installs nginx-light if absent
# Skips, saying why, where nginx can be neither found nor installed.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh
BIN=${BIN:-$(debug_binary)}
need_nginx
need_tools openssl python3 curl
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
dir=$(mktemp -d)
pid="" npid=""
cleanup() {
  [ -n "$npid" ] && kill "$npid" 2>/dev/null
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
fail() { echo "FAIL: $*" >&2; exit 1; }

# A throwaway CA, and the server's and the client's certificates it signs.
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=pixgw-test-ca 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=localhost 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 \
  -extfile server.ext 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=pixgw-client 2>/dev/null
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 2>/dev/null
cd - >/dev/null

# pixgw on loopback in production: the certificate header required, the admin token in a
# file only its owner reads.
port=$(free_port)
(umask 077 && python3 -c 'import secrets; print(secrets.token_hex(24))' >"$dir/admin-token")
"$BIN" serve --production --rail none --data-dir "$dir/run" --listen "127.0.0.1:$port" --require-client-cert \
  --admin-token-file "$dir/admin-token" >"$dir/pixgw.out" 2>"$dir/pixgw.err" &
pid=$!
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
[ ! -e "$dir/run/demo" ] || fail "a production start made the Demo account's files"
PIXGW_ADMIN_TOKEN=$(cat "$dir/admin-token") "$BIN" account create --url "http://127.0.0.1:$port" \
  --name "Acme Pagamentos" --document 11222333000181 --cert "$dir/client.pem" \
  --out "$dir/acme" >"$dir/create.out" || fail "pixgw account create: $(cat "$dir/create.out")"
creds="$dir/acme/credentials.json"
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$creds" "$1"; }
client_id=$(field clientId) secret=$(field clientSecret) acme=$(field accountId)
echo "ok   production start, no Demo; pixgw account create --cert registered the CA's certificate"

# A production account opens empty; the operator funds it, and a second account of this
# gateway gets a key (on --rail none, the only payees there are).
admin() {
  curl -s -X "$1" "http://127.0.0.1:$port$2" -H "Authorization: Bearer $(cat "$dir/admin-token")" \
    -H 'Content-Type: application/json' ${3:+-d "$3"}
}
funded=$(admin POST "/admin/accounts/$acme/adjustments" \
  '{"type": "CREDIT", "amount": "10.00", "reason": "opening funds", "reference": "ci-1"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin).get("operation", ""))')
[ "$funded" = OPERATOR_CREDIT ] || fail "an operator credit: $funded"
shop=$(admin POST /admin/accounts '{"name": "Loja", "document": "52998224725"}' |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["accountId"])')
evp=$(admin POST "/admin/accounts/$shop/keys" '{"keyType": "EVP"}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["key"])')
echo "ok   production: funded by an operator credit; a second account with a key"

# nginx in front, with the configuration of docs/deploy.md as it is written there: its first
# nginx block, with only its ports and file paths changed (each change must apply, so a
# document that drifts from this script fails here rather than passing untested).
nport=$(free_port)
python3 - "$port" "$nport" "$dir" <<'PY' >"$dir/nginx.conf" || fail "docs/deploy.md's nginx block cannot be run"
import re, sys
port, nport, d = sys.argv[1:4]
doc = open("docs/" + "deploy" + ".md").read()  # (split: the reference check reads no section here)
block = re.search(r"```nginx\n(.*?)```", doc, re.S).group(1)
for old, new in [
    ("server 127.0.0.1:8080;", f"server 127.0.0.1:{port};"),
    ("listen 443 ssl;", f"listen 127.0.0.1:{nport} ssl;"),
    ("/etc/pixgw/tls/server.pem", f"{d}/server.pem"),
    ("/etc/pixgw/tls/server.key", f"{d}/server.key"),
    ("/etc/pixgw/tls/clients-ca.pem", f"{d}/ca.pem"),
    # A rate low enough to reach from a script, and the burst with it.
    ("rate=200r/s;", "rate=20r/s;"),
    ("burst=400 nodelay;", "burst=20 nodelay;"),
]:
    if old not in block:
        sys.exit(f"docs/deploy.md's nginx block no longer has {old!r}")
    block = block.replace(old, new)
frame = open(".ci/nginx-front.conf").read().replace("@DIR@", d)
print(frame.replace("@DEPLOY_BLOCK@", block))
PY
"$NGINX" -p "$dir" -c "$dir/nginx.conf" -g 'daemon off;' 2>"$dir/nginx.err" &
npid=$!
front="https://127.0.0.1:$nport"
tls=(--cacert "$dir/ca.pem" --cert "$dir/client.pem" --key "$dir/client.key")
for _ in $(seq 100); do curl -s "${tls[@]}" -o /dev/null "$front/healthz" && break; sleep 0.1; done

body=$(printf '{"clientId": "%s", "clientSecret": "%s"}' "$client_id" "$secret")
token=$(curl -s "${tls[@]}" -X POST "$front/api/auth/token" -H 'Content-Type: application/json' -d "$body" |
  python3 -c 'import json,sys; print(json.load(sys.stdin).get("access_token", ""))')
[ -n "$token" ] || fail "no token through nginx"
echo "ok   a token through nginx with curl --cert"

code=$(curl -s "${tls[@]}" -o "$dir/fund.json" -w '%{http_code}' -X POST "$front/sandbox/pix-in" \
  -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d '{"amount": 10}')
[ "$code" = 403 ] || fail "a sandbox route in production: $code $(cat "$dir/fund.json")"
echo "ok   production: the sandbox routes answer 403"
cash_out=$(printf '{"value": 1.5, "externalId": "via-nginx", "details": {"key": "%s", "keyType": "RANDOM", "name": "Loja", "document": "52998224725"}}' "$evp")
code=$(curl -s "${tls[@]}" -o "$dir/out.json" -w '%{http_code}' -X POST "$front/api/pix/cash-out" \
  -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$cash_out")
[ "$code" = 201 ] || fail "a cash-out through nginx: $code $(cat "$dir/out.json")"
echo "ok   a cash-out through nginx to an account of this gateway: 201"
read -r key doc < <(python3 -c 'import json; k=[k for k in json.load(open("data/dict.json"))["keys"] if k["keyType"]=="EMAIL"][0]; print(k["key"], k["document"])')
outside=$(printf '{"value": 1.5, "externalId": "outside", "details": {"key": "%s", "keyType": "EMAIL", "name": "P", "document": "%s"}}' "$key" "$doc")
code=$(curl -s "${tls[@]}" -o "$dir/out.json" -w '%{http_code}' -X POST "$front/api/pix/cash-out" \
  -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d "$outside")
grep -q PIX_EXTERNAL_PAYOUTS_DISABLED "$dir/out.json" && [ "$code" = 400 ] ||
  fail "a payout to another institution on --rail none: $code $(cat "$dir/out.json")"
echo "ok   --rail none: a payout to another institution is refused (PIX_EXTERNAL_PAYOUTS_DISABLED)"

# A header the client sends itself is overwritten by nginx with the real one.
forged=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(open(sys.argv[1]).read(), safe=""))' "$dir/ca.pem")
code=$(curl -s "${tls[@]}" -o /dev/null -w '%{http_code}' "$front/api/balance" \
  -H "Authorization: Bearer $token" -H "X-SSL-Client-Cert: $forged")
[ "$code" = 200 ] || fail "a client-sent X-SSL-Client-Cert was not overwritten: $code"
echo "ok   a client-sent X-SSL-Client-Cert is overwritten by nginx"

# The operators' and operations' routes do not face clients.
for path in /admin/accounts/$acme /metrics /docs/; do
  code=$(curl -s "${tls[@]}" -o /dev/null -w '%{http_code}' "$front$path" \
    -H "Authorization: Bearer $(cat "$dir/admin-token")")
  [ "$code" = 404 ] || fail "$path is reachable through the front: $code"
done
echo "ok   /admin/, /metrics and /docs are not reachable through the front"

# Without a client certificate there is no request to forward.
code=$(curl -s --cacert "$dir/ca.pem" -o /dev/null -w '%{http_code}' "$front/api/balance" -H "Authorization: Bearer $token")
[ "$code" = 400 ] || fail "a request without a client certificate got $code"
echo "ok   no client certificate: nginx answers 400"

# Straight to pixgw, the token without its certificate is refused.
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/api/balance" -H "Authorization: Bearer $token")
[ "$code" = 401 ] || fail "a direct request without the header got $code"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/api/balance" \
  -H "Authorization: Bearer $token" -H "X-SSL-Client-Cert: $forged")
[ "$code" = 401 ] || fail "a direct request with another certificate got $code"
echo "ok   straight to pixgw, the token without its certificate: 401"
# A client's flood is cut at the front: well past the rate and the burst, nginx answers 429.
codes=$(seq 120 | xargs -P 12 -I{} curl -s "${tls[@]}" -o /dev/null -w '%{http_code}\n' "$front/healthz" | sort | uniq -c)
echo "$codes" | grep -q ' 429$' || fail "120 requests at once were never limited: $codes"
echo "$codes" | grep -q ' 200$' || fail "no request got through the limit: $codes"
echo "ok   limit_req per client certificate: $(echo "$codes" | tr -s ' \n' ' ')"
echo "TLS front: all checks passed"
