#!/usr/bin/env bash
# Makes the upgrade fixture of a release: runs that release's `ember dev`
# (the binary given) in a fresh data directory, gives it something of
# every kind — stacks (one locked, one with a snapshot), an instance, a
# cluster with a hooked deletion policy and a node waiting on its hook, a
# webhook receiver, a software config and deployment, a user and a quota —
# stops it, and keeps its four databases and secrets in OUT. The upgrade
# test (crates/cli/tests/upgrade.rs) starts today's Ember on a copy and
# checks all of it still works.
#
#   EMBER_RELEASE="commit 6b605e9" tests/upgrade/make-fixture.sh /tmp/ember-6b605e9 tests/upgrade/6b605e9
#
# (EMBER_RELEASE says in RELEASE which release made it; the .db files are
# committed, see .gitignore.)
set -euo pipefail
ember="$(realpath "$1")"
out="$(realpath -m "$2")"
root="$(cd "$(dirname "$0")/../.." && pwd)"
work="$(mktemp -d)"
trap 'kill "$dev" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
port=$((20000 + RANDOM % 20000))
"$ember" dev --listen "127.0.0.1:$port" --data-dir "$work/ember-data" >"$work/dev.log" 2>&1 &
dev=$!
export EMBER_DATA_DIR="$work/ember-data"
for _ in $(seq 200); do
    [ -f "$EMBER_DATA_DIR/dev-credentials.json" ] && "$ember" whoami >/dev/null 2>&1 && break
    sleep 0.1
done
E() { "$ember" "$@"; }
EMBER="http://127.0.0.1:$port"
TOKEN=$(python3 -c 'import json;print(json.load(open("'"$EMBER_DATA_DIR"'/dev-credentials.json"))["member"]["token"])')
HEAT="$EMBER/orchestration/v1/demo"
cat >web.yaml <<'YAML'
heat_template_version: 2021-04-16
parameters:
  greeting: {type: string, default: hello}
resources:
  word: {type: OS::Heat::RandomString, properties: {length: 12}}
  note: {type: OS::Heat::Value, properties: {value: {get_param: greeting}}}
  server: {type: OS::Nova::Server, properties: {flavor: m1.small, image: debian-12}}
outputs:
  note: {value: {get_attr: [note, value]}}
YAML
E stack create web -t web.yaml --wait
E stack create locked -t web.yaml --wait
E stack lock locked --reason "maintenance window"
web=$(E stack show web -f json | python3 -c 'import json,sys;print(json.load(sys.stdin)["id"])')
curl -sf -X POST -H "X-Auth-Token: $TOKEN" -H 'Content-Type: application/json' \
  "$HEAT/stacks/web/$web/snapshots" -d '{"name": "before"}' >/dev/null
E instance create loose --flavor m1.small --image debian-12 --wait
E cluster profile-create node --spec "$root/examples/web-profile.yaml"
E cluster create pool --profile node --desired 2 --min 0 --max 6 --wait
cat >drain.yaml <<'YAML'
type: senlin.policy.deletion
version: "1.1"
properties:
  criteria: OLDEST_FIRST
  hooks: {type: zaqar, params: {queue: drain}, timeout: 60}
YAML
E cluster policy-create drain --spec drain.yaml
E cluster policy-attach pool drain --wait
E cluster scale-in pool --count 1
until [ -n "$(E hook list --cluster pool -f value -c token)" ]; do sleep 0.2; done
curl -sf -X POST -H "X-Auth-Token: $TOKEN" -H 'Content-Type: application/json' \
  "$EMBER/clustering/v1/receivers" \
  -d '{"receiver": {"name": "grow", "type": "webhook", "cluster_id": "pool", "action": "CLUSTER_SCALE_OUT", "params": {"count": 1}}}' >/dev/null
config=$(curl -sf -X POST -H "X-Auth-Token: $TOKEN" -H 'Content-Type: application/json' \
  "$HEAT/software_configs" -d '{"name": "hello", "config": "echo hello"}' |
  python3 -c 'import json,sys;print(json.load(sys.stdin)["software_config"]["id"])')
curl -sf -X POST -H "X-Auth-Token: $TOKEN" -H 'Content-Type: application/json' \
  "$HEAT/software_deployments" -d '{"config_id": "'"$config"'", "server_id": "server-1"}' >/dev/null
E --as admin identity user create carol --password 'carol has a long password' --project demo
E --as admin identity role add carol demo member
E --as admin quota set demo --limit stacks=40
kill -TERM "$dev"
wait "$dev" || true
# One file per database, the write-ahead log folded in: copied with
# today's `ember admin backup` (SQLite's VACUUM INTO, read-only: it
# migrates nothing), as the release's own binary may not have it.
today="${EMBER_TODAY:-$root/target/debug/ember}"
[ -x "$today" ] || (cd "$root" && cargo build -q -p ember)
"$today" admin backup --to "$work/copy" >/dev/null
mkdir -p "$out"
cp "$work/copy"/*.db "$work/copy/dev-secrets.json" "$work/copy/dev-identity.json" "$out/"
echo "$("$ember" --version)${EMBER_RELEASE:+ at $EMBER_RELEASE}" >"$out/RELEASE"
echo "fixture of $(cat "$out/RELEASE") in $out"
