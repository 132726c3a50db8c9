#!/usr/bin/env bash
# The worked example, end to end: a cluster of three worker containers, a
# deletion policy whose hook goes to the drainer, and a scale-in whose
# victim keeps working until the drainer has drained it and called
# complete_lifecycle — only then is its container removed. Checks each
# step and exits non-zero if one does not hold.
#
#   examples/container-workers/run.sh
#
# Uses $DOCKER_HOST when set, else starts Podman with scripts/containers.sh;
# $EMBER is the ember binary (default: target/release/ember, built if
# missing).
set -euo pipefail
cd "$(dirname "$0")/../.."
here=examples/container-workers

if [ -z "${DOCKER_HOST:-}" ]; then
    . scripts/containers.sh
    eval "$(ember_containers_start)"
    export DOCKER_HOST="$EMBER_TEST_DOCKER_HOST"
fi
if [ -z "${EMBER:-}" ]; then
    [ -x target/release/ember ] || cargo build --release -q -p ember
    EMBER=target/release/ember
fi
"$here/build-image.sh"

data="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
drainer_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
pids=()
workers() {
    # The example's containers (named worker-<instance uuid>), as JSON.
    curl -fs --unix-socket "${DOCKER_HOST#unix://}" \
        'http://d/v1.41/containers/json?all=true&filters=%7B%22name%22%3A%5B%22worker-%22%5D%7D'
}
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for id in $(workers | python3 -c 'import json,sys; [print(c["Id"]) for c in json.load(sys.stdin)]'); do
        curl -fs -X DELETE --unix-socket "${DOCKER_HOST#unix://}" "http://d/v1.41/containers/$id?force=true" >/dev/null || true
    done
    rm -rf "$data"
}
trap cleanup EXIT

"$EMBER" --config "$here/ember.toml" dev --data-dir "$data" --listen "127.0.0.1:$port" \
    >"$data/ember.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do
    curl -fs "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs "http://127.0.0.1:$port/healthz" >/dev/null || { cat "$data/ember.log"; exit 1; }
export EMBER_DATA_DIR="$data"

EMBER_URL="http://127.0.0.1:$port" DRAINER_PORT="$drainer_port" \
    EMBER_WEBHOOK_SECRET="example-webhook-secret-change-me-0123456789" \
    python3 "$here/drainer.py" >"$data/drainer.log" 2>&1 &
pids+=($!)

policy="$data/drain-policy.yaml"
sed "s/127.0.0.1:8099/127.0.0.1:$drainer_port/" "$here/drain-policy.yaml" >"$policy"
"$EMBER" cluster profile-create worker --spec "$here/worker-profile.yaml"
"$EMBER" cluster create workers --profile worker --desired 3 --wait
"$EMBER" cluster policy-create drain --spec "$policy"
"$EMBER" cluster policy-attach workers drain --wait
echo "== three worker containers:"
workers | python3 -c 'import json,sys; [print("  ", c["Names"][0], c["State"]) for c in json.load(sys.stdin)]'

"$EMBER" cluster scale-in workers --count 1
echo "== scale-in: the victim drains (its log), then it is removed"
for _ in $(seq 1 600); do
    grep -q "complete_lifecycle" "$data/drainer.log" && break
    sleep 0.1
done
cat "$data/drainer.log"
grep -q "worker drained, no job in hand" "$data/drainer.log" || { echo "FAIL: the worker was not drained"; exit 1; }
grep -q "complete_lifecycle .*: HTTP 202" "$data/drainer.log" || { echo "FAIL: complete_lifecycle was not accepted"; exit 1; }
count() { workers | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
for _ in $(seq 1 300); do
    [ "$(count)" = 2 ] && break
    sleep 0.1
done
[ "$(count)" = 2 ] || { echo "FAIL: $(count) worker containers left, expected 2"; exit 1; }
echo "== two workers left; the third was removed after it drained"
"$EMBER" cluster show workers
echo "example OK"
