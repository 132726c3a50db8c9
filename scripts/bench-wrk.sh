#!/usr/bin/env bash
# GET of one stack on `ember dev` under wrk, one connection (issue 45's
# read row), beside the gateway's static version document (no token, no
# call behind the gateway: the floor of Ember's HTTP stack on this machine).
#
#   scripts/bench-wrk.sh [EMBER_BINARY] [SECONDS] [RUNS]
#
# Starts its own `ember dev` on a fresh data directory and port 8124
# (EMBER_BENCH_PORT), creates a stack of 20 OS::Heat::None as the member,
# warms up for 2 s, then prints each run's p50, p99 and requests/s. Needs
# wrk (Debian: apt-get install wrk) and a release build.
set -euo pipefail
cd "$(dirname "$0")/.."
ember="${1:-target/release/ember}"
seconds="${2:-8}"
runs="${3:-3}"
port="${EMBER_BENCH_PORT:-8124}"
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 1; }
[ -x "$ember" ] || { echo "$ember is not built (cargo build --release -p ember)" >&2; exit 1; }

data="$(mktemp -d /tmp/ember-bench-wrk.XXXXXX)"
"$ember" dev --data-dir "$data" --listen "127.0.0.1:$port" >"$data/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$data"' EXIT
base="http://127.0.0.1:$port"
for _ in $(seq 100); do
    curl -sf "$base/healthz" >/dev/null && break
    sleep 0.1
done
curl -sf "$base/healthz" >/dev/null || { echo "ember dev did not start:" >&2; cat "$data/log" >&2; exit 1; }

{
    echo 'heat_template_version: 2018-08-31'
    echo 'resources:'
    for i in $(seq 20); do printf '  r%d:\n    type: OS::Heat::None\n' "$i"; done
} >"$data/stack.yaml"
export EMBER_DATA_DIR="$data" EMBER_URL="$base"
"$ember" --as member stack create wrk -t "$data/stack.yaml" --wait >/dev/null
token="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["member"]["token"])' "$data/dev-credentials.json")"
stack_id="$("$ember" --as member stack show wrk -f value -c id)"
stack_url="$base/orchestration/v1/demo/stacks/wrk/$stack_id"
status="$(curl -s -o /dev/null -w '%{http_code}' -H "X-Auth-Token: $token" "$stack_url")"
[ "$status" = 200 ] || { echo "GET $stack_url answered $status" >&2; exit 1; }

measure() {
    local label=$1
    shift
    wrk -t1 -c1 -d2s "$@" >/dev/null
    for run in $(seq "$runs"); do
        wrk -t1 -c1 -d"${seconds}s" --latency "$@" | awk -v label="$label" -v run="$run" '
            $1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 } $1 == "Requests/sec:" { rate = $2 }
            END { printf "%-44s run %d  p50 %-9s p99 %-9s %s requests/s\n", label, run, p50, p99, rate }'
    done
}
measure "GET one stack of 20 resources (member)" -H "X-Auth-Token: $token" "$stack_url"
measure "GET /orchestration/ (static, no token)" "$base/orchestration/"
