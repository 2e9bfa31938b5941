#!/usr/bin/env bash
# Failover cycles on PostgreSQL (issue "Beyond one machine"): the integration test
# `kill_9_of_the_leader_while_cash_outs_stream...` with PIXGW_FAILOVER_CYCLES cycles (50
# here; 1 in `cargo test`). Two nodes on one throwaway cluster, default lease (5 s); each
# cycle streams cash-outs from 16 clients to the leader, kill -9s it after a different number
# of acknowledgements, times the standby's takeover (must be under 10 s), and starts a fresh
# standby, so the kills alternate between the two nodes' places. At the end the database
# itself is read: every acknowledged cash-out once, none twice, none unsent, and available +
# settled debits equal the funding.
#   benches/failover.sh            # CYCLES=50
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${CYCLES:-50}
start=$(date +%s)
PIXGW_FAILOVER_CYCLES=$CYCLES cargo test -q --release --test api \
  postgres::kill_9_of_the_leader_while_cash_outs_stream_loses_nothing_and_the_standby_serves -- --nocapture 2>&1 |
  grep -E "test result|panicked|assert|failovers under load"
echo "== $CYCLES kill -9 failovers in $(( $(date +%s) - start )) s ($(date -u +%FT%TZ), $(nproc) cores)"
