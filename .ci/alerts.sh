#!/usr/bin/env bash
# The alerting rules and the dashboard of deploy/: `promtool check rules` on the rules,
# `promtool test rules` on their unit tests (each alert fires when it should and not
# before), and every PromQL expression of the Grafana dashboard parsed by promtool too.
#   .ci/alerts.sh         # installs Debian's prometheus package (for promtool) if absent
# Under CI a missing promtool fails; elsewhere it skips, saying why.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh
if ! command -v promtool >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 ||
      { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1; } || true
    pkill -x prometheus 2>/dev/null || true # the package may start the system's own
  fi
fi
if ! command -v promtool >/dev/null 2>&1; then
  [ "${CI:-}" = true ] && { echo "FAIL: promtool (Debian's prometheus package) could not be installed" >&2; exit 1; }
  echo "SKIPPED: promtool is not installed and could not be installed here"
  exit 0
fi
need_tools python3
promtool check rules deploy/prometheus/pixgw-alerts.yml
(cd deploy/prometheus && promtool test rules pixgw-alerts.test.yml)

# The dashboard's queries, as recording rules promtool can parse ($instance as any node).
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - deploy/grafana/pixgw.json >"$dir/dashboard-rules.yml" <<'PY'
import json, sys
dash = json.load(open(sys.argv[1]))
exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
assert exprs, "the dashboard has no queries"
print("groups:\n  - name: dashboard\n    rules:")
for i, e in enumerate(exprs):
    print(f"      - record: dashboard:query{i}\n        expr: {json.dumps(e.replace('$instance', '.*'))}")
PY
promtool check rules "$dir/dashboard-rules.yml"
echo "alerts and dashboard: all checks passed"
