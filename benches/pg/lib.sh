# Helpers the PostgreSQL benches source: throwaway clusters from Debian's binaries (as the
# postgres user when run as root: PostgreSQL refuses root), a pixgw node on one, and
# percentiles of pgbench's per-transaction logs.

PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -n "$PG_BIN" ] || { echo "PostgreSQL is not installed: apt-get install postgresql" >&2; exit 1; }
PIXGW=${PIXGW:-target/release/pixgw}

as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

# pg_new DIR PORT: a fresh cluster in DIR (fsync and synchronous_commit on, the defaults).
pg_new() {
  local dir=$1 port=$2
  mkdir -p "$dir"
  [ "$(id -u)" = 0 ] && chown postgres "$dir"
  as_pg "$PG_BIN/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
  pg_up "$dir" "$port"
}

pg_up() {
  as_pg "$PG_BIN/pg_ctl" -D "$1/data" -l "$1/log" -w \
    -o "-p $2 -k $1 -c listen_addresses=127.0.0.1 -c max_connections=200" start >/dev/null || {
    echo "PostgreSQL did not start on port $2; its log:" >&2
    tail -5 "$1/log" >&2
    return 1
  }
}

pg_down() { as_pg "$PG_BIN/pg_ctl" -D "$1/data" -m "${2:-fast}" -w stop >/dev/null 2>&1 || true; }

# psql_at PORT DB SQL
psql_at() { as_pg "$PG_BIN/psql" -h 127.0.0.1 -p "$1" -U postgres -d "$2" -v ON_ERROR_STOP=1 -qAt -c "$3"; }

# node_start DATA_DIR URL [LISTEN] -> prints the node's base URL once it serves (leader or not).
node_start() {
  local dir=$1 url=$2 listen=${3:-127.0.0.1:0}
  mkdir -p "$dir"
  RUST_LOG=${RUST_LOG:-warn} "$PIXGW" serve --listen "$listen" --data-dir "$dir" --store "$url" \
    >"$dir/stdout" 2>"$dir/stderr" &
  echo $! >"$dir/pid"
  for _ in $(seq 1 200); do
    local line; line=$(head -1 "$dir/stdout" 2>/dev/null || true)
    case "$line" in "pixgw listening on "*) echo "${line#pixgw listening on }"; return 0 ;; esac
    sleep 0.05
  done
  echo "the node in $dir did not start: $(cat "$dir/stderr")" >&2
  return 1
}

# wait_role BASE ROLE SECONDS: polls /healthz until it names ROLE; prints the seconds taken.
wait_role() {
  local base=$1 role=$2 within=$3 start; start=$(date +%s%N)
  while ! curl -s -m 1 "$base/healthz" 2>/dev/null | grep -q "\"role\":\"$role\""; do
    if (( $(date +%s%N) - start > within * 1000000000 )); then
      echo "$base is not the $role after ${within}s" >&2; return 1
    fi
    sleep 0.05
  done
  seconds_since "$start"
}

# seconds_since NANOS: the seconds from NANOS (date +%s%N) to now, with two decimals.
seconds_since() { local ms=$(( ($(date +%s%N) - $1) / 1000000 )); printf '%d.%02d\n' $((ms / 1000)) $((ms % 1000 / 10)); }

# pct FILE... : p50 and p99 (ms) of the latency column (3rd, µs) of pgbench logs.
pct() {
  cat "$@" | awk '{print $3}' | sort -n | awk '{a[NR]=$1} END {
    if (NR == 0) { print "none"; exit }
    printf "p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms", a[int(NR*0.50)+1]/1000, a[int(NR*0.99)+1]/1000, a[int(NR*0.999)+1]/1000 }'
}
