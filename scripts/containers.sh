# A real container engine for Ember's docker compute driver and its tests:
# rootful Podman from Debian serving the Docker Engine API on a unix socket,
# with all of its state under one work dir (`$EMBER_CONTAINERS_DIR`, default
# target/containers), and the images the tests run, built locally from
# nothing (FROM scratch + Debian's busybox-static): no registry is needed.
#
# Sourced by scripts/test and .ci/run (functions below), or run directly:
#   scripts/containers.sh start   # install if missing, configure, start; prints the exports
#   scripts/containers.sh env     # the exports of a running engine
#   scripts/containers.sh stop    # remove every container, stop the API service
#
# The two traps of these machines (see shared/CONTAINERS.md): the runtime is
# runc (crun refuses the hybrid cgroup layout) and default ulimits match the
# sandbox's hard limits. The API service runs in a network namespace of its
# own (its DNS listens on the bridge address), entered with nsenter, not
# `ip netns exec` (which remounts /sys and breaks podman's cgroup lookup).

EMBER_CONTAINER_PACKAGES="podman runc netavark aardvark-dns conmon catatonit iptables uidmap busybox-static"
# The images the tests use: two tags, so an update can change the image.
EMBER_TEST_IMAGE="localhost/ember-test/busybox:1"
EMBER_TEST_IMAGE_2="localhost/ember-test/busybox:2"

ember_containers_dir() {
    local dir="${EMBER_CONTAINERS_DIR:-$PWD/target/containers}"
    mkdir -p "$dir" && (cd "$dir" && pwd)
}

# A network namespace name unique to this work dir, so two checkouts on one
# machine never share one.
ember_containers_netns() {
    echo "ember-ct-$(printf '%s' "$1" | sha1sum | cut -c1-10)"
}

ember_containers_as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo -E "$@"; else
        echo "need root to run: $*" >&2; return 1; fi
}

ember_containers_install() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v runc >/dev/null || missing+=(runc)
    [ -x /usr/libexec/podman/catatonit ] || [ -x /usr/bin/catatonit ] || missing+=(catatonit)
    [ -x /bin/busybox ] || missing+=(busybox-static)
    command -v nsenter >/dev/null || missing+=(util-linux)
    command -v ip >/dev/null || missing+=(iproute2)
    command -v curl >/dev/null || missing+=(curl)
    [ "${#missing[@]}" -eq 0 ] && return 0
    command -v apt-get >/dev/null || { echo "cannot install podman here: no apt-get" >&2; return 1; }
    echo "installing Podman and busybox-static (Debian packages)" >&2
    ember_containers_as_root apt-get update -qq >&2
    # --no-install-recommends: the recommends would pull docker.io and containerd.
    DEBIAN_FRONTEND=noninteractive ember_containers_as_root apt-get install -y -qq \
        --no-install-recommends $EMBER_CONTAINER_PACKAGES util-linux iproute2 curl >/dev/null
}

ember_containers_configure() {
    local dir="$1"
    mkdir -p "$dir/run" "$dir/storage" "$dir/networks"
    cat >"$dir/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$dir/run/events.log"
tmp_dir = "$dir/run/libpod"
static_dir = "$dir/storage/libpod"
volume_path = "$dir/storage/volumes"
[network]
network_config_dir = "$dir/networks"
EOF
    cat >"$dir/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$dir/storage"
runroot = "$dir/run/storage"
EOF
}

# The variables podman (the CLI) and the tests need for this engine.
ember_containers_exports() {
    local dir="$1"
    echo "export CONTAINERS_CONF=$dir/containers.conf"
    echo "export CONTAINERS_STORAGE_CONF=$dir/storage.conf"
    echo "export EMBER_TEST_DOCKER_HOST=unix://$dir/podman.sock"
    echo "export EMBER_TEST_IMAGE=$EMBER_TEST_IMAGE"
    echo "export EMBER_TEST_IMAGE_2=$EMBER_TEST_IMAGE_2"
}

ember_containers_answering() {
    curl -fsS --max-time 5 --unix-socket "$1/podman.sock" http://d/_ping >/dev/null 2>&1
}

ember_containers_build_images() {
    local dir="$1"
    if podman image exists "$EMBER_TEST_IMAGE" && podman image exists "$EMBER_TEST_IMAGE_2"; then
        return 0
    fi
    local context="$dir/image"
    rm -rf "$context" && mkdir -p "$context/rootfs/bin" "$context/rootfs/tmp" "$context/rootfs/etc"
    cp /bin/busybox "$context/rootfs/bin/busybox"
    local applet
    for applet in sh sleep echo cat ls env kill true false test wget nc date touch rm mkdir dd head tail seq trap; do
        [ "$applet" = trap ] && continue
        ln -sf busybox "$context/rootfs/bin/$applet"
    done
    echo "root:x:0:0:root:/:/bin/sh" >"$context/rootfs/etc/passwd"
    cat >"$context/Containerfile" <<'EOF'
FROM scratch
COPY rootfs/ /
ENV PATH=/bin
CMD ["/bin/sleep", "86400"]
EOF
    podman build -q -t "$EMBER_TEST_IMAGE" "$context" >/dev/null
    podman tag "$EMBER_TEST_IMAGE" "$EMBER_TEST_IMAGE_2"
}

# Installs, configures and starts the engine; prints the exports on stdout.
ember_containers_start() {
    local dir netns
    dir="$(ember_containers_dir)" || return 1
    netns="$(ember_containers_netns "$dir")"
    # Only the exports go to stdout (callers eval it): the rest to stderr.
    ember_containers_install >&2 || return 1
    ember_containers_configure "$dir"
    export CONTAINERS_CONF="$dir/containers.conf" CONTAINERS_STORAGE_CONF="$dir/storage.conf"
    if ! ember_containers_answering "$dir"; then
        if [ ! -e "/run/netns/$netns" ]; then
            ember_containers_as_root ip netns add "$netns" >&2 || return 1
        fi
        ember_containers_as_root nsenter --net="/run/netns/$netns" ip link set lo up >&2 || return 1
        # Containers' resolv.conf lists aardvark-dns, then the host's
        # nameservers, which this namespace cannot reach: a lookup that fell
        # through to them (aardvark-dns answers nothing while it reloads,
        # as a container starts or stops) waited in silence, 5 s per try.
        # As local addresses here they refuse at once instead.
        local nameserver
        for nameserver in $(awk '$1 == "nameserver" { print $2 }' /etc/resolv.conf 2>/dev/null); do
            case "$nameserver" in
                *:*) ember_containers_as_root nsenter --net="/run/netns/$netns" \
                    ip -6 addr replace "$nameserver/128" dev lo 2>/dev/null || true ;;
                *) ember_containers_as_root nsenter --net="/run/netns/$netns" \
                    ip addr replace "$nameserver/32" dev lo >&2 || return 1 ;;
            esac
        done
        rm -f "$dir/podman.sock"
        # Detached from this shell: it outlives the script that started it,
        # until `scripts/containers.sh stop`.
        setsid nsenter --net="/run/netns/$netns" \
            podman system service --time=0 "unix://$dir/podman.sock" \
            >"$dir/service.log" 2>&1 </dev/null &
        echo $! >"$dir/service.pid"
        local waited=0
        until ember_containers_answering "$dir"; do
            sleep 0.2
            waited=$((waited + 1))
            if [ "$waited" -ge 150 ]; then
                echo "the Podman API service did not answer within 30 s; its log:" >&2
                tail -n 20 "$dir/service.log" >&2
                return 1
            fi
        done
    fi
    ember_containers_build_images "$dir" >&2 || return 1
    ember_containers_exports "$dir"
}

ember_containers_stop() {
    local dir netns
    dir="$(ember_containers_dir)" || return 1
    netns="$(ember_containers_netns "$dir")"
    export CONTAINERS_CONF="$dir/containers.conf" CONTAINERS_STORAGE_CONF="$dir/storage.conf"
    if [ -f "$dir/containers.conf" ] && command -v podman >/dev/null; then
        podman rm -af -t 0 >/dev/null 2>&1 || true
    fi
    if [ -f "$dir/service.pid" ]; then
        local pid waited=0
        pid="$(cat "$dir/service.pid")"
        kill "$pid" 2>/dev/null || true
        # Its network namespace can go only once it has exited.
        while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 50 ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        rm -f "$dir/service.pid"
    fi
    rm -f "$dir/podman.sock"
    if [ -e "/run/netns/$netns" ]; then
        ember_containers_as_root ip netns delete "$netns" 2>/dev/null || true
    fi
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    case "${1:-}" in
        start) ember_containers_start ;;
        stop) ember_containers_stop ;;
        env) ember_containers_exports "$(ember_containers_dir)" ;;
        *) echo "usage: $0 start|stop|env" >&2; exit 2 ;;
    esac
fi
