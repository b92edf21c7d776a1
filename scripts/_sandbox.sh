# Sourced by scripts/run, scripts/test and scripts/bench: what sandboxes need on this host.
#   ensure_sandbox [required]   both of these:
#   ensure_sandbox_system [required]    bubblewrap and the system's Python 3, installed with
#       apt-get when missing and root;
#   ensure_sandbox_packages [required]  the sandboxes' packages (requirements/sandbox.lock) in
#       .sandbox/packages for that Python (scripts/test installs them while it lints).
#   Without `required`, a host that cannot have them is told so and served without sandboxes
#   (their tools are not offered); with it (scripts/test: the sandbox tests never skip), that
#   is an error.
ROOT="${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
SANDBOX_PACKAGES="$ROOT/.sandbox/packages"

_sandbox_missing() {
    local required="$1" why="$2"
    if [ "$required" = required ]; then
        echo "==> sandboxes: $why" >&2
        return 1
    fi
    echo "==> sandboxes: $why; serving without them (run_code and run_shell are not offered)." >&2
    return 0
}

ensure_sandbox() {
    ensure_sandbox_system "${1:-}" && ensure_sandbox_packages "${1:-}"
}

ensure_sandbox_system() {
    local required="${1:-}" missing=()
    command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
    [ -x /usr/bin/python3 ] || missing+=(python3)
    [ "${#missing[@]}" -eq 0 ] && return 0
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        _sandbox_missing "$required" "${missing[*]} missing and cannot be installed here;" \
            "run \`sudo apt-get install -y ${missing[*]}\` and run again"
        return $?
    fi
    echo "==> sandboxes: installing ${missing[*]} with apt-get" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        "${missing[@]}") >&2 \
        || { _sandbox_missing "$required" "apt-get could not install ${missing[*]}"; return $?; }
}

ensure_sandbox_packages() {
    local required="${1:-}" python=/usr/bin/python3 version stamp
    [ -x "$python" ] || return 0  # no sandboxes here (ensure_sandbox_system said why)
    version="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    stamp="$SANDBOX_PACKAGES/.omniforge-$(sha256sum < "$ROOT/requirements/sandbox.lock" | cut -c1-16)-$version"
    [ -f "$stamp" ] && return 0
    echo "==> sandboxes: installing requirements/sandbox.lock for Python $version into .sandbox/packages" >&2
    rm -rf "$SANDBOX_PACKAGES"
    # The project's pip fetches wheels for the sandboxes' Python (its version, this platform),
    # each checked against the lock's hashes.
    "$VENV/bin/python" -m pip install --quiet --require-hashes --no-deps --only-binary=:all: \
        --python-version "$version" --target "$SANDBOX_PACKAGES" \
        --requirement "$ROOT/requirements/sandbox.lock" >&2 \
        || { _sandbox_missing "$required" "the sandboxes' packages could not be installed"; return $?; }
    # Read-only for everyone but its owner: sandboxes mount it read-only besides.
    chmod -R a+rX,go-w "$SANDBOX_PACKAGES"
    touch "$stamp"
}
