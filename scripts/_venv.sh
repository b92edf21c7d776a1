# Sourced by scripts/run, scripts/test, scripts/bench and scripts/lock: creates the project's
# virtualenv or brings it in line with the lock files (requirements/*.lock, made by scripts/lock).
# Usage: ensure_venv [test]   the runtime lock, or the test lock (runtime + test extras)
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

# What the virtualenv is stamped with: the lock and pyproject.toml (its entry points and the
# project itself are installed from it), so a change to either syncs it again.
lock_digest() {
    cat "$ROOT/requirements/$1.lock" "$ROOT/pyproject.toml" | sha256sum | cut -c1-16
}

ensure_venv() {
    local extras="${1:-}" python lock stamp unlocked
    case "$extras" in
        "" | test) ;;
        *) echo "ensure_venv: no lock for extras '$extras' (none, or test)" >&2; return 1 ;;
    esac
    if [ ! -x "$VENV/bin/python" ]; then
        python="$(pick_python)" || return 1
        echo "==> creating virtualenv in $VENV with $python" >&2
        "$python" -m venv "$VENV"
    fi
    # A virtualenv that has had the test extras keeps them: the test lock pins the runtime's
    # dependencies at the same versions, so it serves scripts/run as well.
    if [ -z "$extras" ] && compgen -G "$VENV/.omniforge-*-test" >/dev/null; then
        extras=test
    fi
    lock="${extras:-runtime}"
    stamp="$VENV/.omniforge-$(lock_digest "$lock")-${extras:-base}"
    [ -f "$stamp" ] && { compile_project || return 1; export PATH="$VENV/bin:$PATH"; return 0; }

    echo "==> syncing $VENV with requirements/$lock.lock" >&2
    # Every file checked against the lock's hashes; --no-deps: the lock is complete, so nothing
    # outside it comes in, whatever a package's metadata asks for.
    "$VENV/bin/python" -m pip install --quiet --require-hashes --no-deps \
        --requirement "$ROOT/requirements/$lock.lock" >&2 || return 1
    # What an earlier lock brought and this one no longer lists goes (editables stay: the
    # project, its client and the example plugin).
    unlocked="$("$VENV/bin/python" "$ROOT/scripts/_unlocked.py" "$ROOT/requirements/$lock.lock")" \
        || return 1
    if [ -n "$unlocked" ]; then
        echo "==> removing what requirements/$lock.lock no longer lists: ${unlocked//$'\n'/ }" >&2
        # shellcheck disable=SC2086 # one distribution name per word
        "$VENV/bin/python" -m pip uninstall --quiet --yes $unlocked >&2 || return 1
    fi
    "$VENV/bin/python" -m pip install --quiet --no-deps --editable "$ROOT" >&2 || return 1
    rm -f "$VENV"/.omniforge-*
    touch "$stamp"
    compile_project || return 1
    export PATH="$VENV/bin:$PATH"
}

# Bytecode for the project's own code, as pip writes it for every package it installs: a start
# then reads it instead of compiling the whole app first (every start would where
# PYTHONDONTWRITEBYTECODE is set, ~0.6 s of CPU). Only what changed is compiled again (~0.1 s).
compile_project() {
    "$VENV/bin/python" -m compileall -q "$ROOT/app" >/dev/null
}
