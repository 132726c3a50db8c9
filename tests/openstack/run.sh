#!/usr/bin/env bash
# The openstack backend's suite: starts the real OpenStack (cloud.sh; about
# 3 GB of memory, ~2 minutes the first time, seconds when it runs already)
# and runs every test that needs it — the clients against the services
# (crates/openstack/tests/cloud.rs), every resource type against them
# (crates/engine/tests/openstack), Ember driving the cloud end to end
# (tests/e2e/openstack), and its engine killed at seeded moments on it
# (crates/cli/tests/openstack_crashes.rs) — failing, not skipping, if the
# cloud is missing.
# Extra arguments go to the test runner. `tests/openstack/cloud.sh stop`
# stops the cloud afterwards (CI leaves its machine to be discarded).
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/bootstrap.sh
ember_bootstrap
EMBER_TEST_OPENSTACK="$(tests/openstack/cloud.sh)"
export EMBER_TEST_OPENSTACK EMBER_TEST_REQUIRE_OPENSTACK=1
echo "OpenStack for the tests: $EMBER_TEST_OPENSTACK"
filter='binary(cloud) | binary(openstack) | binary(openstack_crashes) | test(/^openstack::/)'
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --no-fail-fast -E "$filter" "$@"
else
    cargo test -p ember-openstack --test cloud "$@"
    cargo test -p ember-engine --test openstack "$@"
    cargo test -p ember --test openstack_crashes "$@"
    cargo test -p ember-tests --test e2e openstack:: "$@"
fi
