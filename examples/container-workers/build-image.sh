#!/usr/bin/env bash
# Builds localhost/ember-example/worker:1 (FROM scratch + busybox-static +
# worker.sh) with podman, or docker when there is no podman. With the
# Podman of scripts/containers.sh, export what `scripts/containers.sh env`
# prints first (so the image lands in that engine's storage).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
image="${WORKER_IMAGE:-localhost/ember-example/worker:1}"
[ -x /bin/busybox ] || { echo "needs Debian's busybox-static (/bin/busybox)" >&2; exit 1; }
context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/rootfs/bin" "$context/rootfs/tmp"
cp /bin/busybox "$context/rootfs/bin/busybox"
ln -s busybox "$context/rootfs/bin/sh"
cp "$here/worker/Containerfile" "$here/worker/worker.sh" "$context/"
builder=podman
command -v podman >/dev/null || builder=docker
"$builder" build -q -t "$image" -f "$context/Containerfile" "$context" >/dev/null
echo "built $image with $builder"
