#!/usr/bin/env bash
# Kill -9 cycles under a stream of cash-outs (issue "The journal"): the integration test
# `kill_9_while_cash_outs_stream_in...` with PIXGW_CRASH_CYCLES cycles (100 here; 4 in
# `cargo test`). Each cycle streams cash-outs from 16 clients, SIGKILLs the server after a
# different number of acknowledgements, and starts it again; at the end every acknowledged
# cash-out must be stored once, none twice, and available + settled debits and fees must
# equal the funding.
#   benches/crash.sh            # CYCLES=100
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${CYCLES:-100}
start=$(date +%s)
PIXGW_CRASH_CYCLES=$CYCLES cargo test -q --release --test api \
  recovery::kill_9_while_cash_outs_stream_in_loses_nothing_acknowledged_and_duplicates_nothing 2>&1 |
  grep -E "test result|panicked|assert"
echo "== $CYCLES kill -9 cycles in $(( $(date +%s) - start )) s ($(date -u +%FT%TZ), $(nproc) cores)"
