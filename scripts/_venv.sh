# Sourced by scripts/run, scripts/test and scripts/bench: creates or updates the project's virtualenv.
# Usage: ensure_venv [extras]   e.g. ensure_venv test
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${OMNIFORGE_VENV:-$ROOT/.venv}"

pick_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3.11 python3.12 python3.13 python3; do
        [ -n "$candidate" ] || continue
        command -v "$candidate" >/dev/null 2>&1 || continue
        if "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "OmniForge needs Python 3.11 or newer; none was found on PATH (set PYTHON=/path/to/python3.11)." >&2
    return 1
}

ensure_venv() {
    local extras="${1:-}" spec="$ROOT" python stamp
    [ -n "$extras" ] && spec="$ROOT[$extras]"
    if [ ! -x "$VENV/bin/python" ]; then
        python="$(pick_python)" || return 1
        echo "==> creating virtualenv in $VENV with $python" >&2
        "$python" -m venv "$VENV"
        "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
    fi
    # Reinstall only when the project's dependency list changed since the last install; an
    # install with extras also satisfies a plain one.
    local digest
    digest="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
    stamp="$VENV/.omniforge-$digest-${extras:-base}"
    if [ -z "$extras" ] && compgen -G "$VENV/.omniforge-$digest-*" >/dev/null; then
        stamp="$(compgen -G "$VENV/.omniforge-$digest-*" | head -n 1)"
    fi
    if [ ! -f "$stamp" ]; then
        echo "==> installing OmniForge${extras:+ with [$extras]} into $VENV" >&2
        "$VENV/bin/python" -m pip install --quiet --editable "$spec" >&2
        rm -f "$VENV"/.omniforge-*
        touch "$stamp"
    fi
    export PATH="$VENV/bin:$PATH"
}
