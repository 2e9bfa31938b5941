#!/usr/bin/env bash
# pixgw on PostgreSQL against the naive PostgreSQL-backed peer, on one throwaway cluster, in
# the same minutes (issue "Beyond one machine", docs/benchmarks.md).
#
# The peer is what a simple gateway does for a durable debit on one hot account: one
# transaction per payment with a guarded balance UPDATE and an INSERT of the transaction,
# synchronous commit; pgbench drives it directly (no HTTP: the peer's best case). pixgw runs
# as a node with --store on a database of the same cluster and is driven by `pixgw load`
# over HTTP, cash-outs of one account. Both closed loop with 64 clients, then open loop at
# 500/s; ROUNDS pairs, alternating.
#   benches/pg/peer.sh              # ROUNDS=2 DURATION=10 RATE=500
set -euo pipefail
cd "$(dirname "$0")/../.."
. benches/pg/lib.sh
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-10}
RATE=${RATE:-500}
CLIENTS=${CLIENTS:-64}
[ -x "$PIXGW" ] || cargo build --release -q
work=$(mktemp -d /tmp/pixgw-peer.XXXX)
chmod 755 "$work"
port=$((20000 + RANDOM % 20000))
cleanup() {
  [ -f "$work/node/pid" ] && kill "$(cat "$work/node/pid")" 2>/dev/null || true
  sleep 0.5
  pg_down "$work/pg" immediate
  rm -rf "$work"
}
trap cleanup EXIT
pg_new "$work/pg" "$port"
psql_at "$port" postgres "CREATE DATABASE peer" && psql_at "$port" postgres "CREATE DATABASE gw"
psql_at "$port" peer "
  CREATE TABLE balances (account_id int PRIMARY KEY, available numeric(18,2) NOT NULL CHECK (available >= 0));
  CREATE TABLE transactions (id bigserial PRIMARY KEY, account_id int NOT NULL REFERENCES balances,
    value numeric(18,2) NOT NULL, external_id text NOT NULL UNIQUE, created_at timestamptz NOT NULL);
  INSERT INTO balances VALUES (1, 1000000000000);"
cat >"$work/debit.sql" <<'SQL'
\set r random(1, 1000000000000000)
BEGIN;
UPDATE balances SET available = available - 1.00 WHERE account_id = 1 AND available >= 1.00;
INSERT INTO transactions (account_id, value, external_id, created_at)
  VALUES (1, 1.00, :client_id || '-' || :r, now());
COMMIT;
SQL
mkdir -p "$work/pgbench" && mv "$work/debit.sql" "$work/pgbench/"
[ "$(id -u)" = 0 ] && chown -R postgres "$work/pgbench"

base=$(node_start "$work/node" "postgres://postgres@127.0.0.1:$port/gw")
wait_role "$base" leader 30 >/dev/null
pixgw_load() {
  "$PIXGW" load --url "$base" --data-dir "$work/node" --connections "$CLIENTS" --duration "${DURATION}s" \
    --fund 100000000 --json "$@" 2>/dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin)
l, s = v["latencyMs"], v["serviceMs"]
check = "ok" if v["consistency"].get("ok") else "FAILED"
print("%.0f/s  p50 %.2f ms  p99 %.2f ms  server p99 %.2f ms  check %s"
      % (v["requestsPerSecond"], l["p50"], l["p99"], s["p99"], check))'
}
peer() {
  local tag=$1; shift
  rm -f "$work"/pgbench/log.*
  local out
  out=$(cd "$work/pgbench" && as_pg pgbench -h 127.0.0.1 -p "$port" -U postgres -n -j 2 -T "$DURATION" \
    -f debit.sql -l --log-prefix=log "$@" peer 2>&1)
  local tps; tps=$(echo "$out" | sed -nE 's/^tps = ([0-9.]+).*/\1/p' | head -1)
  printf "%.0f/s  %s" "$tps" "$(pct "$work"/pgbench/log.*)"
}

echo "== $(date -u +%FT%TZ), $(nproc) cores, PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'), ${DURATION}s runs"
for round in $(seq 1 "$ROUNDS"); do
  p=$(peer closed -c "$CLIENTS")
  g=$(pixgw_load)
  echo "round $round closed loop, $CLIENTS clients: peer $p | pixgw $g"
  echo "  ratio: $(python3 -c "print(round(${g%%/s*} / ${p%%/s*}, 2))")x"
done
for round in $(seq 1 "$ROUNDS"); do
  p=$(peer open -c "$CLIENTS" -R "$RATE")
  g=$(pixgw_load --rate "$RATE")
  echo "round $round open loop at $RATE/s: peer $p | pixgw $g"
done
