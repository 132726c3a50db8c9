#!/usr/bin/env bash
# A real OpenStack for Ember's tests of the openstack backend: installs what
# a fresh Debian machine lacks (MariaDB and RabbitMQ binaries; the services
# themselves go into a venv under target/openstack), starts Keystone,
# Placement, Nova (fake virt driver), Neutron (fake L2 agent), Glance and
# Cinder (fake volume driver) with start-openstack.sh (idempotent: what
# runs already is left running), serves image data for Glance's
# web-download imports, prepares what the tests use (setup_cloud.py), and
# prints the path of the facts file the tests read:
#
#   export EMBER_TEST_OPENSTACK=$(tests/openstack/cloud.sh)
#
# `tests/openstack/cloud.sh stop` stops it all again (data kept).
# See ../shared/openstack/RECIPE.md for the recipe and its traps.
set -euo pipefail
cd "$(dirname "$0")/../.."
export OS_BASE="${OS_BASE:-$PWD/target/openstack}"
here=tests/openstack
image_port="${IMAGE_SERVER_PORT:-18780}"
export IMAGE_SERVER_PORT="$image_port"

if [ "${1:-}" = stop ]; then
    if [ -f "$OS_BASE/run/image-server.pid" ]; then
        kill "$(cat "$OS_BASE/run/image-server.pid")" 2>/dev/null || true
        rm -f "$OS_BASE/run/image-server.pid"
    fi
    exec "$here/stop-openstack.sh"
fi

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
if [ ! -f "$OS_BASE/run/keystone.pid" ] && port_open "${KEYSTONE_PORT:-15000}"; then
    echo "FAIL: something not started from this checkout answers on 127.0.0.1:${KEYSTONE_PORT:-15000}" \
        "(another checkout's test cloud? stop it with OS_BASE=<its target/openstack> tests/openstack/cloud.sh stop)" >&2
    exit 1
fi

{
    missing=()
    command -v mariadbd >/dev/null || missing+=(mariadb-server)
    [ -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || missing+=(rabbitmq-server)
    command -v curl >/dev/null || missing+=(curl)
    python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
    if [ ${#missing[@]} -gt 0 ]; then
        . scripts/bootstrap.sh
        ember_apt_install "${missing[@]}"
    fi
    "$here/start-openstack.sh"

    images="$OS_BASE/images"
    mkdir -p "$images" "$OS_BASE/run" "$OS_BASE/logs"
    pidfile="$OS_BASE/run/image-server.pid"
    if ! { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }; then
        setsid "$OS_BASE/venv/bin/python" -m http.server "$image_port" --bind 127.0.0.1 \
            --directory "$images" >>"$OS_BASE/logs/image-server.log" 2>&1 </dev/null &
        echo $! >"$pidfile"
    fi
    OS_CLIENT_CONFIG_FILE="$OS_BASE/clouds.yaml" "$OS_BASE/venv/bin/python" \
        "$here/setup_cloud.py" "$OS_BASE/ember-cloud.json" "$images" "$image_port"
} >&2
echo "$OS_BASE/ember-cloud.json"
