#!/usr/bin/env bash
# Installs the Python tools the tests drive, each in a project-local
# virtualenv under target/test-tools (never the system Python); idempotent,
# silent when up to date:
#
#   scripts/test-tools.sh          # the clients (tests/requirements.txt) and
#                                  # a real Keystone (tests/keystone) that
#                                  # ./scripts/test needs
#   scripts/test-tools.sh --all    # also tempest with Senlin's and Heat's
#                                  # plugins (tests/conformance) and the test
#                                  # OpenStack's services (tests/openstack)
#
# CI runs `--all` in the background while the code builds: it is mostly
# downloading and unpacking, so it costs the build little.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/bootstrap.sh

tools="$PWD/target/test-tools"
if [ ! -x "$tools/venv/bin/pip" ]; then
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        command -v apt-get >/dev/null && ember_apt_install python3 python3-venv
    fi
    python3 -m venv "$tools/venv"
fi
if ! cmp -s tests/requirements.txt "$tools/requirements.installed" 2>/dev/null; then
    "$tools/venv/bin/pip" install -q --disable-pip-version-check -r tests/requirements.txt
    cp tests/requirements.txt "$tools/requirements.installed"
fi
tests/keystone/setup.sh

if [ "${1:-}" = --all ]; then
    tests/conformance/senlin.sh --prepare
    tests/conformance/heat.sh --prepare
    OS_BASE="$PWD/target/openstack" tests/openstack/start-openstack.sh --venv-only
fi
