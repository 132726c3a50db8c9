# What the conformance scripts share: sourced by senlin.sh and heat.sh.

# conformance_venv VENV PACKAGE...: a virtualenv holding the packages,
# made once.
conformance_venv() {
    local venv=$1
    shift
    if [ ! -x "$venv/bin/tempest" ] || ! "$venv/bin/pip" show -q "${@%%==*}" >/dev/null 2>&1; then
        echo "installing $* into $venv" >&2
        python3 -m venv "$venv"
        "$venv/bin/pip" install -q --disable-pip-version-check "$@"
    fi
}

# conformance_start_ember EMBER WORK ARGS...: starts `ember dev` on a free
# port with its data under WORK, stopped when the script exits; sets url
# and dev_pid once it answers /healthz.
conformance_start_ember() {
    local ember=$1 work=$2 port
    shift 2
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    url="http://127.0.0.1:$port"
    "$ember" dev "$@" --listen "127.0.0.1:$port" --data-dir "$work/data" >"$work/ember-dev.log" 2>&1 &
    dev_pid=$!
    trap 'kill "$dev_pid" 2>/dev/null; wait "$dev_pid" 2>/dev/null || true' EXIT
    for _ in $(seq 300); do
        curl -fsS "$url/healthz" >/dev/null 2>&1 && return 0
        kill -0 "$dev_pid" 2>/dev/null || { cat "$work/ember-dev.log" >&2; exit 1; }
        sleep 0.1
    done
    echo "ember dev did not become healthy (see $work/ember-dev.log)" >&2
    exit 1
}

# conformance_count LOG WHAT: tempest's total of WHAT (Passed, Failed,
# Skipped) in LOG, 0 if it printed none.
conformance_count() {
    local count
    count="$(sed -n "s/^ - $2: \([0-9]*\).*/\1/p" "$1" | tail -n1)"
    echo "${count:-0}"
}
