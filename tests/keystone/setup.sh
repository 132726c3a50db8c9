#!/usr/bin/env bash
# Installs a real OpenStack Keystone (tests/keystone/requirements.txt) into its
# own venv, target/test-tools/keystone-venv, apart from the clients' venv
# (its server-side pins may conflict with theirs). Idempotent and silent when
# already up to date; reinstalls when requirements.txt changes (compared with
# the copy requirements.installed kept in the venv).
# Then: target/test-tools/keystone-venv/bin/python tests/keystone/run.py --port P --dir D
set -euo pipefail
cd "$(dirname "$0")/../.."
venv="$PWD/target/test-tools/keystone-venv"
req=tests/keystone/requirements.txt

if ! "$venv/bin/python" -c '' 2>/dev/null || [ ! -x "$venv/bin/pip" ]; then
    if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
        . scripts/bootstrap.sh
        command -v apt-get >/dev/null && ember_apt_install python3 python3-venv
    fi
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
fi
if ! cmp -s "$req" "$venv/requirements.installed" 2>/dev/null; then
    echo "installing Keystone into $venv" >&2
    "$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
    cp "$req" "$venv/requirements.installed"
fi
