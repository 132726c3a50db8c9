# Sourced by scripts/dev and scripts/test: makes sure a fresh Debian machine
# has what building Ember needs (a C compiler for the bundled SQLite, and a
# Rust toolchain), installing it when it can.

ember_as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
        echo "need root to run: $*" >&2; return 1; fi
}

ember_apt_install() {
    [ "$#" -eq 0 ] && return 0
    echo "installing Debian packages: $*" >&2
    ember_as_root apt-get update -qq
    DEBIAN_FRONTEND=noninteractive ember_as_root apt-get install -y -qq "$@" >/dev/null
}

ember_bootstrap() {
    local missing=()
    command -v cc >/dev/null || missing+=(build-essential)
    command -v curl >/dev/null || missing+=(curl ca-certificates)
    if [ "${#missing[@]}" -gt 0 ]; then
        command -v apt-get >/dev/null || { echo "please install: ${missing[*]}" >&2; return 1; }
        ember_apt_install "${missing[@]}"
    fi
    if ! command -v cargo >/dev/null; then
        if [ -x "$HOME/.cargo/bin/cargo" ]; then
            export PATH="$HOME/.cargo/bin:$PATH"
        else
            echo "no Rust toolchain: installing it with rustup (https://rustup.rs)" >&2
            curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal -c rustfmt -c clippy
            export PATH="$HOME/.cargo/bin:$PATH"
        fi
    fi
}
