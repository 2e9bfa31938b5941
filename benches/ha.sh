#!/usr/bin/env bash
# PostgreSQL with a synchronous standby (issue "Beyond one machine"): two clusters on this
# machine, the standby synchronous (`synchronous_standby_names`), one pixgw node on the
# multi-host URL with target_session_attrs=read-write. Under load (`pixgw load`, closed
# loop) the primary is stopped the hard way (pg_ctl -m immediate, as a crash) and the
# standby promoted; pixgw must follow by itself, and the load tool's check, once the run
# ends, must find every acknowledged cash-out on the server once and the balance exact.
#   benches/ha.sh            # DURATION=30 KILL_AT=8 CONNECTIONS=16
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/pg/lib.sh
DURATION=${DURATION:-30}
KILL_AT=${KILL_AT:-8}
CONNECTIONS=${CONNECTIONS:-16}
[ -x "$PIXGW" ] || cargo build --release -q
work=$(mktemp -d /tmp/pixgw-ha.XXXX)
chmod 755 "$work"
p1=$((20000 + RANDOM % 20000)) p2=$((40001 + RANDOM % 20000))
cleanup() {
  [ -f "$work/node/pid" ] && kill "$(cat "$work/node/pid")" 2>/dev/null || true
  sleep 0.5
  pg_down "$work/primary" immediate
  pg_down "$work/standby" immediate
  rm -rf "$work"
}
trap cleanup EXIT

pg_new "$work/primary" "$p1"
mkdir -p "$work/standby"
[ "$(id -u)" = 0 ] && chown postgres "$work/standby"
as_pg "$PG_BIN/pg_basebackup" -D "$work/standby/data" -R -X stream \
  -d "host=127.0.0.1 port=$p1 user=postgres application_name=standby1"
pg_up "$work/standby" "$p2"
# Set on the primary only, after the base backup: a promoted standby that still named a
# synchronous standby of its own would wait for it on every commit, for ever.
psql_at "$p1" postgres "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 1 (standby1)'" >/dev/null
psql_at "$p1" postgres "SELECT pg_reload_conf()" >/dev/null
for _ in $(seq 100); do
  [ "$(psql_at "$p1" postgres "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby1'")" = sync ] && break
  sleep 0.1
done
echo "== $(date -u +%FT%TZ), $(nproc) cores: primary :$p1, synchronous standby :$p2 ($(psql_at "$p1" postgres "SELECT sync_state FROM pg_stat_replication"))"
psql_at "$p1" postgres "CREATE DATABASE gw"
url="postgres://postgres@127.0.0.1:$p1,127.0.0.1:$p2/gw?target_session_attrs=read-write"
base=$(node_start "$work/node" "$url")
wait_role "$base" leader 30 >/dev/null

"$PIXGW" load --url "$base" --data-dir "$work/node" --connections "$CONNECTIONS" --duration "${DURATION}s" \
  --fund 100000000 --json >"$work/load.json" 2>"$work/load.err" &
load=$!
sleep "$KILL_AT"
as_pg "$PG_BIN/pg_ctl" -D "$work/primary/data" -m immediate -w stop >/dev/null
as_pg "$PG_BIN/pg_ctl" -D "$work/standby/data" -w promote >/dev/null
echo "primary stopped (immediate) at ${KILL_AT}s, standby promoted"
took=$(wait_role "$base" leader 60) || { echo "the node:"; grep -v "pixgw::access" "$work/node/stderr" | tail -25; exit 1; }
echo "pixgw leads again on the promoted standby $took s after the promotion"
wait "$load" || true
python3 - "$work/load.json" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]), parse_float=str)
print("load: %s requests, %s/s; by status %s" % (v["requests"], v["requestsPerSecond"][:7], v["byStatus"]))
print("  refused: %s" % ", ".join("%s %s x%s" % (e["status"], e["code"], e["count"]) for e in v["errors"]))
for c in v["consistency"]["checks"]:
    print("  %-45s %s  %s" % (c["check"], "ok" if c["ok"] else "FAILED", c["detail"]))
print("consistency:", "ok" if v["consistency"]["ok"] else "FAILED")
PY
