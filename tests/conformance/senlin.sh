#!/usr/bin/env bash
# Senlin's own API suite — senlin-tempest-plugin 1.8.0 (its tests.api, or
# the tests named) on tempest 47 — against a fresh `ember dev`, through the
# Keystone front door with pre-provisioned credentials (two members of two
# projects and one admin; no identity-admin calls). Prints tempest's totals
# and the failing tests, and writes the whole report to
# target/senlin-tempest/. Exits non-zero when fewer than
# EMBER_SENLIN_MIN_PASS percent (default 0: report only) of the tests that
# ran passed.
#
#   tests/conformance/senlin.sh                       # tests.api
#   tests/conformance/senlin.sh 'tests\.api\.clusters' # a regex of tests
#   EMBER_BINARY=target/release/ember tests/conformance/senlin.sh
#   EMBER_SENLIN_WORK=target/senlin-mine tests/conformance/senlin.sh  # another report directory
#   tests/conformance/senlin.sh --prepare             # only install tempest and the plugin
set -euo pipefail
cd "$(dirname "$0")/../.."
root="$PWD"
regex="senlin_tempest_plugin\\.${1:-tests\\.api}"
work="${EMBER_SENLIN_WORK:-$root/target/senlin-tempest}"
venv="$root/target/test-tools/tempest-venv"
ember="${EMBER_BINARY:-$root/target/debug/ember}"

. tests/conformance/lib.sh
conformance_venv "$venv" tempest==47.0.0 senlin-tempest-plugin==1.8.0
if [ "${1:-}" = --prepare ]; then
    exit 0
fi
if [ ! -x "$ember" ]; then
    cargo build -q -p ember
fi

rm -rf "$work"
mkdir -p "$work/data"
conformance_start_ember "$ember" "$work"

# Pre-provisioned credentials: tempest locks one account per test class
# and role set, so each of the two workers needs its own. Four members and
# two admins, each in a project of its own (tempest's primary and alt
# credentials must be in different projects).
cli() { "$ember" --url "$url" --data-dir "$work/data" --as admin "$@"; }
: >"$work/accounts.txt"
for account in m1:member m2:member m3:member m4:member a1:admin a2:admin; do
    name="tempest-${account%%:*}" role="${account##*:}"
    password="$(head -c 18 /dev/urandom | base64 | tr -d '/+=')"
    cli identity project create "$name" >/dev/null
    cli identity user create "$name" --password "$password" --project "$name" >/dev/null
    cli identity role add "$name" "$name" "$role" >/dev/null
    [ "$role" = admin ] && cli identity role add "$name" "$name" member >/dev/null
    echo "$name $password $role" >>"$work/accounts.txt"
done
python3 - "$work" <<'PY'
import json, sys
work = sys.argv[1]
accounts = []
for line in open(f"{work}/accounts.txt"):
    name, password, role = line.split()
    account = {"username": name, "project_name": name, "password": password,
               "domain_name": "Default", "roles": [role] if role == "member" else [role, "member"]}
    if role == "admin":
        account["types"] = ["admin"]
    accounts.append(account)
with open(f"{work}/accounts.yaml", "w") as out:
    json.dump(accounts, out, indent=1)  # JSON is YAML
PY

mkdir -p "$work/tempest/etc"
cat >"$work/tempest/etc/tempest.conf" <<CONF
[DEFAULT]
log_file = $work/tempest.log
[oslo_concurrency]
lock_path = $work/locks
[auth]
use_dynamic_credentials = false
test_accounts_file = $work/accounts.yaml
default_credentials_domain_name = Default
create_isolated_networks = false
[identity]
uri_v3 = $url/identity/v3
auth_version = v3
region = RegionOne
disable_ssl_certificate_validation = true
[identity-feature-enabled]
api_v2 = false
api_v3 = true
[service_available]
senlin = true
nova = false
neutron = false
glance = false
cinder = false
swift = false
[clustering]
catalog_type = clustering
wait_timeout = 60
CONF

cd "$work/tempest"
"$venv/bin/stestr" init >/dev/null 2>&1 || true
cat >.stestr.conf <<STESTR
[DEFAULT]
test_path=$(cd "$venv"/lib/python3*/site-packages && pwd)/senlin_tempest_plugin/tests
top_dir=$(cd "$venv"/lib/python3*/site-packages && pwd)
STESTR
# Left out: the two tests asserting Senlin's 500 for a policy spec with an
# unknown property (their own comments say 400): Ember answers 400, as for
# a profile's (docs/guide/clusters.md).
exclude='test_policy_(create|validate)_spec_validation_failed'
status=0
TEMPEST_CONFIG_DIR="$work/tempest/etc" "$venv/bin/tempest" run --regex "$regex" \
    --exclude-regex "$exclude" --concurrency 2 >"$work/run.log" 2>&1 || status=$?
sed -n '/^Totals/,$p' "$work/run.log"
"$venv/bin/stestr" failing --list 2>/dev/null | sed 's/^/FAILED /' | tee "$work/failing.txt" || true
passed="$(conformance_count "$work/run.log" Passed)"
failed="$(conformance_count "$work/run.log" Failed)"
ran=$((passed + failed))
percent=0
[ "$ran" -gt 0 ] && percent=$((100 * passed / ran))
echo "senlin-tempest-plugin: $passed of $ran passed ($percent%); report in $work"
if [ "$ran" -eq 0 ]; then
    echo "no test ran; tempest said:" >&2
    tail -n 40 "$work/run.log" >&2
    exit 1
fi
[ "$percent" -ge "${EMBER_SENLIN_MIN_PASS:-0}" ]
